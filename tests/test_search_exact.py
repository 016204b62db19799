"""The SQL top-k is exactly the top-k of the product formula over all eligible rows."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import sqlalchemy as sa

from service.retrieval.ranking import RankingWeights, age_in_days, final_score, recency
from service.retrieval.sql import search_by_vector

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MODEL = "test-model"
WEIGHTS = RankingWeights()


def unit(index: int, size: int = 1536) -> np.ndarray:
    vector = np.zeros(size, dtype=np.float32)
    vector[index] = 1.0
    return vector


def with_similarity(similarity: float, axis: int) -> np.ndarray:
    """A unit vector whose cosine with unit(0) is exactly ``similarity``."""
    return (similarity * unit(0) + np.sqrt(1 - similarity ** 2) * unit(axis)).astype(np.float32)


def insert(session, title, vector, *, age_days=0.0, importance=1.0, model=MODEL) -> int:
    return session.execute(sa.text("""
        INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance, created_at)
        VALUES (:title, :title, :embedding, CAST(l2_normalize(CAST(:embedding AS vector)) AS halfvec), :model,
                :importance, :created_at) RETURNING id
    """), {"title": title, "embedding": vector, "model": model if vector is not None else None,
           "importance": importance, "created_at": NOW - timedelta(days=age_days)}).scalar_one()


def search(session, query=None, limit=3):
    return search_by_vector(session, unit(0) if query is None else query, model=MODEL, limit=limit,
                            weights=WEIGHTS, now=NOW)


def test_old_but_important_and_new_but_unimportant_rank_by_the_formula(session):
    # (title, similarity, age in days, importance) -> expected score
    rows = [
        ("new, important", 0.60, 0, 2.0),      # 0.48 + 0.40   = 0.880
        ("old, important", 0.90, 400, 2.0),    # 0.72 + 0      = 0.720
        ("new, unimportant", 0.85, 0, 0.0),    # 0.68 + 0      = 0.680
        ("mid-age, important", 0.70, 300, 2.0),  # 0.56 + 0.0712 = 0.6312
    ]
    for axis, (title, similarity, age, importance) in enumerate(rows, start=1):
        insert(session, title, with_similarity(similarity, axis), age_days=age, importance=importance)

    results = search(session, limit=4)

    assert [r.title for r in results] == ["new, important", "old, important", "new, unimportant",
                                          "mid-age, important"]
    assert [r.score for r in results] == pytest.approx([0.88, 0.72, 0.68, 0.56 + 0.2 * (65 / 365) * 2.0],
                                                       abs=1e-6)
    assert results[0].recency == pytest.approx(1.0)
    assert results[1].recency == 0.0


def test_a_row_far_down_the_cosine_list_is_found_when_importance_lifts_it(session):
    for axis in range(1, 21):  # twenty close matches, a year old
        insert(session, f"old close match {axis}", with_similarity(0.70 - axis * 0.005, axis), age_days=365)
    boosted = insert(session, "new critical article", with_similarity(0.45, 30), importance=2.0)

    results = search(session, limit=3)

    # 0.45*0.8 + 1*0.2*2 = 0.76 beats every 0.8*0.695 = 0.556; by cosine it is 21st of 21,
    # so a "fetch the nearest 3×k, then re-rank" search would have missed it.
    assert results[0].id == boosted
    assert results[0].score == pytest.approx(0.76, abs=1e-6)


def test_rows_without_embedding_or_from_another_model_are_never_returned(session):
    insert(session, "pending", None)
    insert(session, "other model", unit(0), model="some-other-model")
    kept = insert(session, "eligible", with_similarity(0.1, 5))

    assert [r.id for r in search(session, limit=10)] == [kept]


def test_equal_scores_are_ordered_by_id_for_stable_pages(session):
    first = insert(session, "a", with_similarity(0.5, 1))
    second = insert(session, "b", with_similarity(0.5, 2))
    assert [r.id for r in search(session, limit=2)] == [first, second]


def test_sql_top_k_equals_brute_force_over_random_rows(session):
    rng = np.random.default_rng(7)
    rows = []
    for index in range(300):
        vector = np.zeros(1536, dtype=np.float32)
        vector[:24] = rng.standard_normal(24)
        age, importance = float(rng.uniform(0, 500)), float(rng.uniform(0, 2))
        row_id = insert(session, f"row {index}", vector, age_days=age, importance=importance)
        rows.append((row_id, vector / np.linalg.norm(vector), age, importance))

    naive_misses = 0
    for _ in range(25):
        query = np.zeros(1536, dtype=np.float32)
        query[:24] = rng.standard_normal(24)
        q = query / np.linalg.norm(query)
        expected = sorted(
            ((final_score(float(v @ q), recency(age), importance), row_id) for row_id, v, age, importance in rows),
            key=lambda pair: (-pair[0], pair[1]),
        )[:10]
        results = search(session, query=query, limit=10)
        assert [r.id for r in results] == [row_id for _, row_id in expected]
        assert [r.score for r in results] == pytest.approx([score for score, _ in expected], abs=1e-5)

        nearest_30 = sorted(rows, key=lambda row: -float(row[1] @ q))[:30]
        naive = sorted(((final_score(float(v @ q), recency(age), imp), rid) for rid, v, age, imp in nearest_30),
                       key=lambda pair: (-pair[0], pair[1]))[:10]
        naive_misses += [rid for _, rid in naive] != [rid for _, rid in expected]
    # The over-fetch shortcut really does get some of these wrong; the exact search never does.
    assert naive_misses > 0


def test_recency_uses_the_same_age_as_the_pure_function(session):
    insert(session, "ninety days", with_similarity(0.5, 1), age_days=90)
    result = search(session, limit=1)[0]
    assert result.recency == pytest.approx(recency(age_in_days(result.created_at, NOW)), abs=1e-9)
    assert result.recency == pytest.approx(1 - 90 / 365, abs=1e-9)


# --- sections: an article scores by the best of its own vector and its sections' ------------------------

def insert_section(session, article_id: int, ordinal: int, vector, *, model=MODEL, path=("Part",)) -> int:
    return session.execute(sa.text("""
        INSERT INTO knowledge_sections (article_id, ordinal, heading_path, content, char_start, char_end,
                                        content_sha256, embedding, embedding_model)
        VALUES (:article_id, :ordinal, :path, :content, 0, 1, :sha, :embedding, :model) RETURNING id
    """), {"article_id": article_id, "ordinal": ordinal, "path": list(path), "content": f"section {ordinal}",
           "sha": f"{article_id}-{ordinal}", "embedding": vector,
           "model": model if vector is not None else None}).scalar_one()


def test_an_article_is_found_by_a_section_deep_inside_it(session):
    card_only = insert(session, "close card", with_similarity(0.60, 1))
    deep = insert(session, "weak card, strong section", with_similarity(0.10, 2))
    insert_section(session, deep, 0, with_similarity(0.10, 3), path=())
    matched = insert_section(session, deep, 1, with_similarity(0.90, 4), path=("Payment declined?",))

    results = search(session, limit=2)

    assert [r.id for r in results] == [deep, card_only]
    assert results[0].similarity == pytest.approx(0.90, abs=1e-6)
    assert results[0].section_similarity == pytest.approx(0.90, abs=1e-6)
    assert (results[0].section_id, results[0].section_path) == (matched, ("Payment declined?",))
    assert results[0].score == pytest.approx(0.9 * 0.8 + 0.2, abs=1e-6)


def test_pending_sections_and_sections_of_another_model_do_not_count(session):
    article = insert(session, "article", with_similarity(0.20, 1))
    insert_section(session, article, 0, None)
    insert_section(session, article, 1, with_similarity(0.95, 2), model="some-other-model")
    [result] = search(session, limit=1)
    assert result.similarity == pytest.approx(0.20, abs=1e-6)
    assert result.section_similarity is None


def test_a_section_never_makes_an_article_without_its_own_vector_searchable(session):
    pending = insert(session, "pending card", None)
    insert_section(session, pending, 0, unit(0))
    assert search(session, limit=5) == []


def test_article_granularity_ignores_sections(session):
    article = insert(session, "article", with_similarity(0.30, 1))
    insert_section(session, article, 0, with_similarity(0.90, 2))
    [result] = search_by_vector(session, unit(0), model=MODEL, limit=1, weights=WEIGHTS, now=NOW,
                                granularity="article")
    assert result.similarity == pytest.approx(0.30, abs=1e-6)


def test_sql_top_k_with_sections_equals_brute_force(session):
    rng = np.random.default_rng(11)
    articles = []  # (id, best-of vectors as unit rows, age, importance)
    for index in range(120):
        count = int(rng.integers(0, 6))  # 0..5 sections
        vectors = []
        for _ in range(count + 1):
            vector = np.zeros(1536, dtype=np.float32)
            vector[:16] = rng.standard_normal(16)
            vectors.append(vector)
        age, importance = float(rng.uniform(0, 730)), float(rng.uniform(0, 2))
        article_id = insert(session, f"article {index}", vectors[0], age_days=age, importance=importance)
        for ordinal, vector in enumerate(vectors[1:]):
            insert_section(session, article_id, ordinal, vector)
        articles.append((article_id, np.stack([v / np.linalg.norm(v) for v in vectors]), age, importance))

    for _ in range(20):
        query = np.zeros(1536, dtype=np.float32)
        query[:16] = rng.standard_normal(16)
        q = query / np.linalg.norm(query)
        expected = sorted(((final_score(float((m @ q).max()), recency(age), imp), aid)
                           for aid, m, age, imp in articles), key=lambda pair: (-pair[0], pair[1]))[:10]
        results = search(session, query=query, limit=10)
        assert [r.id for r in results] == [aid for _, aid in expected]
        assert [r.score for r in results] == pytest.approx([score for score, _ in expected], abs=1e-5)
