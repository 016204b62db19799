"""The exact walk returns exactly what the exact scan returns; its bounds hold; the database keeps them true."""

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from service.knowledge.articles import add_article
from service.knowledge.clusters import default_cluster_count, spherical_kmeans, train_clusters
from service.retrieval.bounds import (
    ALL_PERIODS,
    PERIOD_SECONDS,
    boost_bucket,
    boost_period,
    bucket_ceiling,
    cosine_ceiling,
    first_period,
    period_recency_ceiling,
)
from service.retrieval.ranking import RankingWeights, kth_largest
from service.retrieval.sql import RetrievalSettings, rank_articles
from service.retrieval.walk import walk_candidates

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MODEL = "test-model"
WEIGHTS = RankingWeights()
DIMENSIONS = 384
EXACT = RetrievalSettings(walk_budget=0)
WALK = RetrievalSettings(index_min_rows=0, walk_budget=1_000_000)


@pytest.mark.parametrize("values, k, expected", [
    ([0.3, 0.9, 0.5], 1, 0.9), ([0.3, 0.9, 0.5], 2, 0.5), ([0.3, 0.9, 0.5], 3, 0.3),
    ([0.3], 2, None), ([], 1, None), ([0.7, 0.7], 2, 0.7),
])
def test_kth_largest_counts_from_the_top(values, k, expected):
    assert kth_largest(values, k) == expected


@pytest.mark.parametrize("importance, bucket, ceiling", [
    (0.0, 0, 0.0625), (0.24, 3, 0.25), (0.25, 4, 0.3125), (1.0, 16, 1.0625), (1.74, 27, 1.75), (1.9375, 31, 2.0),
    (2.0, 31, 2.0),
])
def test_importance_buckets_are_sixteenth_steps_and_their_ceiling_bounds_them(importance, bucket, ceiling):
    assert boost_bucket(importance) == bucket
    assert bucket_ceiling(bucket) == ceiling >= importance


def test_postgres_and_python_put_rows_in_the_same_bucket_and_period(session):
    rng = np.random.default_rng(3)
    importances = [0.0, 0.25, 0.5, 1.0, 1.75, 2.0, *rng.uniform(0, 2, 30)]
    instants = [datetime.fromtimestamp(PERIOD_SECONDS * 20_000, timezone.utc) + timedelta(microseconds=delta)
                for delta in (-1, 0, 1)] + [NOW - timedelta(days=float(d)) for d in rng.uniform(0, 800, 30)]
    for importance in importances:
        assert session.execute(sa.text("SELECT boost_bucket(:i)"), {"i": float(importance)}).scalar_one() == \
            boost_bucket(float(importance))
    for instant in instants:
        assert session.execute(sa.text("SELECT boost_period(:t)"), {"t": instant}).scalar_one() == \
            boost_period(instant)


@settings(max_examples=300, deadline=None)
@given(importance=st.floats(0, 2), age_days=st.floats(-30, 800), needed=st.floats(-0.1, 0.5))
def test_first_period_never_skips_a_row_whose_boost_reaches_what_is_needed(importance, age_days, needed):
    created = NOW - timedelta(days=age_days)
    bucket, period = boost_bucket(importance), boost_period(created)
    boost = WEIGHTS.recency_weight * importance * min(1.0, max(0.0, 1.0 - age_days / 365.0))
    start = first_period(needed, bucket, NOW, WEIGHTS)
    if boost >= needed:
        assert start is not None and period >= start
    # and the ceiling of the row's (bucket, period) is never below its boost
    assert WEIGHTS.recency_weight * bucket_ceiling(bucket) * period_recency_ceiling(period, NOW, WEIGHTS) >= boost


def test_first_period_takes_everything_when_nothing_is_needed_and_nothing_when_too_much_is():
    assert first_period(0.0, 0, NOW, WEIGHTS) == ALL_PERIODS
    assert first_period(0.41, 7, NOW, WEIGHTS) is None  # above 0.2 × 2 × 1
    assert first_period(0.1, 0, NOW, WEIGHTS) is None   # bucket 0: at most 0.2 × 0.0625


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.floats(0.01, 3.0))
def test_the_cosine_ceiling_bounds_every_vector_within_the_radius(seed, spread):
    rng = np.random.default_rng(seed)
    centroid = rng.standard_normal(16)
    centroid /= np.linalg.norm(centroid)
    members = centroid + spread * rng.standard_normal((20, 16)) / 4
    members /= np.linalg.norm(members, axis=1, keepdims=True)
    radius = float(np.max(np.arccos(np.clip(members @ centroid, -1, 1))))
    query = rng.standard_normal(16)
    query /= np.linalg.norm(query)
    ceiling = cosine_ceiling(math.acos(float(np.clip(query @ centroid, -1, 1))), radius)
    assert float(np.max(members @ query)) <= ceiling


def test_spherical_kmeans_finds_well_separated_topics():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:4]
    points = np.concatenate([c + 0.05 * rng.standard_normal((50, 8)) for c in centres])
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    centroids = spherical_kmeans(points, 4, iterations=10, rng=np.random.default_rng(1))
    assert sorted(np.argmax(np.abs(centroids), axis=1).tolist()) == [0, 1, 2, 3]
    assert default_cluster_count(600_000) == 387 and default_cluster_count(0) == 1


def padded(rng: np.random.Generator, centre: np.ndarray, spread: float) -> np.ndarray:
    """A unit vector near ``centre`` in the first 384 dimensions, zero past them (as MiniLM's are)."""
    vector = np.zeros(1536, dtype=np.float32)
    real = centre + spread * rng.standard_normal(DIMENSIONS)
    vector[:DIMENSIONS] = real / np.linalg.norm(real)
    return vector


WORDS = ("refund", "password", "shipping", "invoice", "login", "parcel")


def insert_article(session, title, card, model, importance, created_at, sections=(), content=None) -> int:
    article_id = session.execute(sa.text("""
        INSERT INTO knowledge_base (title, content, embedding, embedding_model, importance, created_at)
        VALUES (:title, :content, :embedding, :model, :importance, :created_at) RETURNING id
    """), {"title": title, "content": content or title, "embedding": card, "model": model,
           "importance": importance, "created_at": created_at}).scalar_one()
    for ordinal, vector in enumerate(sections):
        session.execute(sa.text("""
            INSERT INTO knowledge_sections (article_id, ordinal, content, char_start, char_end, content_sha256,
                                            embedding, embedding_model, kind)
            VALUES (:article_id, :ordinal, :content, 0, 1, 'x', :embedding, :model, :kind)
        """), {"article_id": article_id, "ordinal": ordinal, "content": f"section {ordinal}", "embedding": vector,
               "model": model, "kind": "heading" if ordinal == 0 else "text"})
    return article_id


def insert_corpus(session, rng: np.random.Generator, centres: np.ndarray, articles: int, max_sections: int,
                  spread: float = 0.1) -> None:
    """Clustered random articles and sections, some from another model, some exact duplicates (ties)."""
    previous = None
    for number in range(articles):
        if previous is not None and rng.random() < 0.15:
            card, importance, age, sections = previous  # an exact tie with the previous article: order by id
        else:
            centre = centres[rng.integers(len(centres))]
            card = padded(rng, centre, spread)
            importance = float(rng.choice([0.0, 1.0, 2.0])) if rng.random() < 0.3 else float(rng.uniform(0, 2))
            age = float(rng.uniform(-5, 730))
            sections = [padded(rng, centre, spread) for _ in range(rng.integers(0, max_sections + 1))]
        model = MODEL if rng.random() > 0.1 else "other-model"
        words = " ".join(rng.choice(WORDS, size=rng.integers(1, 4)))
        insert_article(session, f"article {number}", card, model, importance, NOW - timedelta(days=age), sections,
                       content=f"article {number} about {words}")
        previous = (card, importance, age, sections)


def rank(session, query, limit, retrieval):
    return rank_articles(session, query, model=MODEL, limit=limit, weights=WEIGHTS, retrieval=retrieval, now=NOW)


def comparable(rows):
    return [(r.id, round(r.score, 9), r.section_id, r.section_similarity) for r in rows]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), articles=st.integers(1, 40), later=st.integers(0, 8),
       max_sections=st.integers(0, 4), clusters=st.integers(1, 6), limit=st.integers(1, 10),
       granularity=st.sampled_from(["section", "article"]), spread=st.sampled_from([0.02, 0.1, 1.0]))
def test_the_walk_returns_exactly_what_the_exact_scan_returns(session, seed, articles, later, max_sections,
                                                               clusters, limit, granularity, spread):
    savepoint = session.begin_nested()
    try:
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((3, DIMENSIONS))
        insert_corpus(session, rng, centres, articles, max_sections, spread)
        train_clusters(session, MODEL, clusters=clusters, seed=seed % 1000)
        insert_corpus(session, rng, centres, later, max_sections, spread)  # written after training: unassigned
        if rng.random() < 0.5:  # an importance change after training moves the article's sections too
            session.execute(sa.text("UPDATE knowledge_base SET importance = 2.0 - importance"))
        query = padded(rng, centres[0], 0.3)
        walk = walk_candidates(session, query, model=MODEL, limit=limit, weights=WEIGHTS, now=NOW,
                               budget=1_000_000, granularity=granularity)
        event(f"walk read {'all' if walk.walked_rows >= articles * 3 else 'part'} of the rows")
        walked = RetrievalSettings(index_min_rows=0, walk_budget=1_000_000, granularity=granularity)
        scanned = RetrievalSettings(walk_budget=0, granularity=granularity)
        assert comparable(rank(session, query, limit, walked)) == comparable(rank(session, query, limit, scanned))
    finally:
        savepoint.rollback()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), articles=st.integers(1, 30), clusters=st.integers(1, 4),
       limit=st.integers(1, 8), words=st.lists(st.sampled_from(WORDS), min_size=0, max_size=2, unique=True),
       vector_weight=st.sampled_from([0.5, 0.95, 1.0]))
def test_the_convex_hybrid_walk_returns_exactly_what_the_exact_scan_returns(session, seed, articles, clusters,
                                                                             limit, words, vector_weight):
    savepoint = session.begin_nested()
    try:
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((3, DIMENSIONS))
        insert_corpus(session, rng, centres, articles, 3)
        train_clusters(session, MODEL, clusters=clusters, seed=seed % 1000)
        query = padded(rng, centres[0], 0.3)
        tsquery = " | ".join(words) or None
        results = []
        for budget, min_rows in ((0, 0), (1_000_000, 0)):
            retrieval = RetrievalSettings(mode="hybrid", fusion="convex", vector_weight=vector_weight,
                                          walk_budget=budget, index_min_rows=min_rows)
            results.append(comparable(rank_articles(
                session, query, model=MODEL, limit=limit, weights=WEIGHTS, retrieval=retrieval, now=NOW,
                tsquery=tsquery, and_tsquery=tsquery, lexemes=list(words))))
        assert results[0] == results[1]
    finally:
        savepoint.rollback()


def test_the_walk_reads_a_fraction_of_the_rows_when_topics_and_boosts_separate(session):
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((8, DIMENSIONS))
    insert_corpus(session, rng, centres, 300, 3, spread=0.03)
    report = train_clusters(session, MODEL, clusters=8)
    total = session.execute(sa.text("SELECT (SELECT count(*) FROM knowledge_sections WHERE embedding_model = :m)"
                                    " + (SELECT count(*) FROM knowledge_base WHERE embedding_model = :m)"),
                            {"m": MODEL}).scalar_one()
    query = padded(rng, centres[0], 0.03)

    walk = walk_candidates(session, query, model=MODEL, limit=3, weights=WEIGHTS, now=NOW, budget=100_000)

    assert report.clusters == 8 and report.vectors == total
    # A topic is an eighth of the rows; the walk reads about that (91 of 672 when written), never most of them.
    assert walk is not None and walk.walked_rows < total / 4, (walk, total)
    assert len(walk.candidate_ids) >= 3
    assert comparable(rank(session, query, 3, WALK)) == comparable(rank(session, query, 3, EXACT))


def test_a_walk_past_its_budget_hands_over_to_the_exact_scan(session):
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((1, DIMENSIONS))
    insert_corpus(session, rng, centres, 40, 3)
    query = padded(rng, centres[0], 0.3)

    assert walk_candidates(session, query, model=MODEL, limit=10, weights=WEIGHTS, now=NOW, budget=5) is None
    small_budget = RetrievalSettings(index_min_rows=0, walk_budget=5)
    assert comparable(rank(session, query, 10, small_budget)) == comparable(rank(session, query, 10, EXACT))


def test_training_assigns_every_vector_within_its_clusters_radius(session):
    rng = np.random.default_rng(2)
    insert_corpus(session, rng, rng.standard_normal((4, DIMENSIONS)), 60, 3, spread=0.5)
    train_clusters(session, MODEL, clusters=4)
    train_clusters(session, MODEL, clusters=5)  # re-training replaces the model's clusters

    outside = session.execute(sa.text("""
        SELECT count(*) FROM (
            SELECT cluster_id, embedding FROM knowledge_base WHERE embedding_model = :m
            UNION ALL SELECT cluster_id, embedding FROM knowledge_sections WHERE embedding_model = :m) v
        LEFT JOIN vector_clusters c ON c.id = v.cluster_id
        WHERE c.id IS NULL OR acos(least(1, 1 - (v.embedding <=> c.centroid))) > c.radius
    """), {"m": MODEL}).scalar_one()
    assert outside == 0
    assert session.execute(sa.text("SELECT count(*) FROM vector_clusters WHERE model = :m"),
                           {"m": MODEL}).scalar_one() == 5


def test_the_database_widens_a_radius_for_any_writer_and_drops_impossible_assignments(session):
    rng = np.random.default_rng(4)
    centre = rng.standard_normal(DIMENSIONS)
    insert_corpus(session, rng, centre[None, :], 10, 1, spread=0.01)
    train_clusters(session, MODEL, clusters=1)
    cluster_id, radius = session.execute(sa.text("SELECT id, radius FROM vector_clusters WHERE model = :m"),
                                         {"m": MODEL}).one()
    far = padded(rng, -centre, 0.01)

    stray = insert_article(session, "stray", far, MODEL, 1.0, NOW)
    session.execute(sa.text("UPDATE knowledge_base SET cluster_id = :c WHERE id = :id"), {"c": cluster_id, "id": stray})
    other = insert_article(session, "other model", far, "other-model", 1.0, NOW)
    session.execute(sa.text("UPDATE knowledge_base SET cluster_id = :c WHERE id = :id"), {"c": cluster_id, "id": other})

    widened = session.execute(sa.text("SELECT radius FROM vector_clusters WHERE id = :c"),
                              {"c": cluster_id}).scalar_one()
    assert radius < 0.5 and widened > math.radians(170)  # the stray vector is ~180° away
    assert session.execute(sa.text("SELECT cluster_id FROM knowledge_base WHERE id = :id"),
                           {"id": other}).scalar_one() is None


def test_sections_carry_their_articles_bucket_and_period_through_every_change(session):
    rng = np.random.default_rng(6)
    article = insert_article(session, "a", padded(rng, np.ones(DIMENSIONS), 0.1), MODEL, 0.3,
                             NOW - timedelta(days=100), [padded(rng, np.ones(DIMENSIONS), 0.1)] * 2)

    def buckets():
        return set(session.execute(sa.text("""
            SELECT s.boost_bucket = kb.boost_bucket AND s.boost_period = kb.boost_period
            FROM knowledge_sections s JOIN knowledge_base kb ON kb.id = s.article_id WHERE kb.id = :id
        """), {"id": article}).scalars())

    assert buckets() == {True}
    session.execute(sa.text("UPDATE knowledge_base SET importance = 1.9, created_at = :t WHERE id = :id"),
                    {"t": NOW, "id": article})
    assert buckets() == {True}
    session.execute(sa.text("UPDATE knowledge_sections SET boost_bucket = 0, boost_period = 0 WHERE article_id = :id"),
                    {"id": article})
    assert buckets() == {True}  # a writer cannot set them to anything else


def test_vectors_written_through_the_service_join_their_nearest_cluster(runtime, session):
    first = add_article(session, runtime.embedder, {"title": "Refunds", "content": "How to get a refund."})
    train_clusters(session, runtime.embedder.model_name, clusters=1)
    second = add_article(session, runtime.embedder, {"title": "Passwords", "content": "Reset it from the login page."})
    assigned = session.execute(sa.text("""
        SELECT (SELECT bool_and(cluster_id IS NOT NULL) FROM knowledge_base WHERE id = ANY(:ids)),
               (SELECT bool_and(cluster_id IS NOT NULL) FROM knowledge_sections WHERE article_id = :second)
    """), {"ids": [first.id, second.id], "second": second.id}).one()
    assert assigned == (True, True)
