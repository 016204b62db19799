"""The half-precision scan with its full-precision re-score returns exactly the full-precision scan's top-k."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.retrieval.precision import half_cosine_error, rescore_margin, similarity_margin
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, build_statement, rank_articles

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MODEL = "test-model"
WEIGHTS = RankingWeights()
DIMENSIONS = 384
EPSILON = half_cosine_error(DIMENSIONS)


@pytest.mark.parametrize("dimensions, low, high", [(1, 9.7e-4, 9.9e-4), (384, 1.1e-3, 1.2e-3),
                                                   (1536, 1.6e-3, 1.8e-3)])
def test_the_half_precision_error_bound_grows_with_the_width(dimensions, low, high):
    assert low < half_cosine_error(dimensions) < high


def test_the_margins_scale_with_the_weight_the_cosine_has_in_the_score():
    assert rescore_margin(384, similarity_weight=0.8) == pytest.approx(2 * 0.8 * EPSILON)
    assert rescore_margin(384, similarity_weight=0.8, vector_weight=0.5) == pytest.approx(0.8 * EPSILON)
    assert rescore_margin(384, similarity_weight=0.8, vector_weight=0.0) > 0  # double rounding only
    assert similarity_margin(384) == pytest.approx(EPSILON)
    with pytest.raises(ValueError):
        half_cosine_error(0)


def _adversarial_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """Unit vectors that stress half precision: spiky, with subnormal-range coordinates, near-duplicates."""
    dense = rng.standard_normal((count, DIMENSIONS))
    spiky = dense * (rng.random((count, DIMENSIONS)) < 0.02) + 1e-6 * dense  # most coordinates under 2^-14
    base = dense[0] / np.linalg.norm(dense[0])
    near = base + 1e-4 * rng.standard_normal((count, DIMENSIONS))
    vectors = np.concatenate([dense, spiky, near])
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_pgvectors_own_half_and_single_precision_cosines_stay_within_the_bound(session):
    """The bound checked against what PostgreSQL computes, not against a model of it."""
    rng = np.random.default_rng(11)
    vectors = _adversarial_vectors(rng, 200)
    queries = [vectors[0], vectors[250], vectors[-1], _adversarial_vectors(rng, 1)[0]]
    worst = 0.0
    for query in queries:
        differences = session.execute(sa.text("""
            SELECT (1.0 - (CAST(l2_normalize(v) AS halfvec) <=> CAST(l2_normalize(CAST(:q AS vector)) AS halfvec)))
                 - (1.0 - (v <=> CAST(:q AS vector)))
            FROM unnest(CAST(:vectors AS vector[])) AS v
        """), {"q": query, "vectors": [v for v in vectors]}).scalars().all()
        worst = max(worst, max(abs(d) for d in differences))
    assert 1e-5 < worst <= EPSILON  # the rounding is real, and bounded


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def at_cosine(query: np.ndarray, cosine: float, rng: np.random.Generator) -> np.ndarray:
    """A unit vector whose cosine with the unit ``query`` is ``cosine`` (in exact arithmetic)."""
    other = rng.standard_normal(DIMENSIONS)
    other -= (other @ query) * query
    other /= np.linalg.norm(other)
    return unit(cosine * query.astype(np.float64) + np.sqrt(max(0.0, 1 - cosine**2)) * other)


def insert_article(session, title: str, card: np.ndarray, sections: list[np.ndarray], importance: float,
                   age_days: float, content: str) -> int:
    article_id = session.execute(sa.text("""
        INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance,
                                    created_at)
        VALUES (:title, :content, :padded, CAST(l2_normalize(CAST(:card AS vector)) AS halfvec), :model,
                :importance, :created_at) RETURNING id
    """), {"title": title, "content": content, "padded": np.pad(card, (0, 1536 - DIMENSIONS)), "card": card,
           "model": MODEL, "importance": importance, "created_at": NOW - timedelta(days=age_days)}).scalar_one()
    for ordinal, vector in enumerate(sections):
        session.execute(sa.text("""
            INSERT INTO knowledge_sections (article_id, ordinal, content, char_start, char_end, content_sha256,
                                            embedding, embedding_model)
            VALUES (:article_id, :ordinal, :content, 0, 1, 'x', :embedding, :model)
        """), {"article_id": article_id, "ordinal": ordinal, "content": f"section {ordinal}", "embedding": vector,
               "model": MODEL})
    return article_id


WORDS = ("refund", "password", "shipping", "invoice")


def insert_near_ties(session, rng: np.random.Generator, query: np.ndarray, articles: int, max_sections: int,
                     straddle: float) -> None:
    """Articles whose cosines sit within a few error bounds of one another: pairs ``straddle × ε`` apart in
    either direction (so half precision may order them either way), exact duplicates, and a spread around."""
    base = float(rng.uniform(0.3, 0.9))
    previous = None
    for number in range(articles):
        roll = rng.random()
        if previous is not None and roll < 0.15:
            card, importance, age = previous  # an exact tie: ordered by id
        else:
            offset = straddle * EPSILON * float(rng.choice([-1, -0.5, 0, 0.5, 1])) if roll < 0.7 else \
                float(rng.uniform(-0.3, 0.05))
            card = at_cosine(query, min(1.0, base + offset), rng)
            importance = 1.0 if rng.random() < 0.7 else float(rng.uniform(0, 2))
            age = 10.0 if rng.random() < 0.7 else float(rng.uniform(0, 400))
        sections = [at_cosine(query, min(1.0, base + straddle * EPSILON * float(rng.uniform(-1, 1))), rng)
                    for _ in range(rng.integers(0, max_sections + 1))]
        words = " ".join(rng.choice(WORDS, size=rng.integers(1, 3)))
        insert_article(session, f"article {number}", card, sections, importance, age, f"about {words}")
        previous = (card, importance, age)


def comparable(rows):
    return [(r.id, r.score, r.similarity, r.section_id, r.section_similarity, r.vector_rank, r.lexical_rank)
            for r in rows]


def rank(session, query, limit, retrieval, precision, tsquery=None):
    lexemes = tsquery.split(" | ") if tsquery else None
    return rank_articles(session, query, model=MODEL, limit=limit, weights=WEIGHTS, retrieval=retrieval, now=NOW,
                         precision=precision, tsquery=tsquery, and_tsquery=tsquery, lexemes=lexemes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), articles=st.integers(1, 30), max_sections=st.integers(0, 3),
       limit=st.integers(1, 10), straddle=st.sampled_from([0.3, 1.0, 2.0, 4.0]),
       granularity=st.sampled_from(["section", "article"]),
       hybrid=st.sampled_from([None, ("refund", "convex", 0.95), ("password | ship", "convex", 0.5),
                               ("refund", "zscore", 0.9), ("password | ship", "minmax", 0.5)]),
       pool=st.sampled_from([1, 3, 100]))
def test_the_half_precision_scan_returns_exactly_the_full_precision_scans_top_k(
        session, seed, articles, max_sections, limit, straddle, granularity, hybrid, pool):
    savepoint = session.begin_nested()
    try:
        rng = np.random.default_rng(seed)
        query = unit(rng.standard_normal(DIMENSIONS))
        insert_near_ties(session, rng, query, articles, max_sections, straddle)
        retrieval = RetrievalSettings(granularity=granularity)
        tsquery = None
        if hybrid:
            tsquery, fusion, weight = hybrid
            retrieval = RetrievalSettings(mode="hybrid", fusion=fusion, vector_weight=weight, granularity=granularity,
                                          pool=pool)
        half = rank(session, query, limit, retrieval, None, tsquery)
        full = rank(session, query, limit, retrieval, "full", tsquery)
        assert comparable(half) == comparable(full)
    finally:
        savepoint.rollback()


def test_near_ties_inside_the_bound_are_ordered_by_full_precision_not_by_half(session):
    """Pairs a fraction of the bound apart, many of them: half precision alone orders some wrongly."""
    rng = np.random.default_rng(5)
    query = unit(rng.standard_normal(DIMENSIONS))
    for number in range(40):
        insert_article(session, f"tie {number}", at_cosine(query, 0.7 + 0.2 * EPSILON * float(rng.uniform(-1, 1)),
                                                           rng), [], 1.0, 10.0, "about refund")
    half_only = session.execute(sa.text("""
        SELECT id FROM knowledge_base WHERE embedding_model = :model
        ORDER BY embedding_half <=> CAST(l2_normalize(CAST(:q AS vector)) AS halfvec), id LIMIT 10
    """), {"model": MODEL, "q": query}).scalars().all()
    full = [r.id for r in rank(session, query, 10, RetrievalSettings(granularity="article"), "full")]
    assert half_only != full  # the re-score is needed...
    by_article = RetrievalSettings(granularity="article")
    assert [r.id for r in rank(session, query, 10, by_article, None)] == full  # ...and it is done


def test_the_default_statement_scans_the_half_precision_column_and_rrf_the_full_one():
    for statement in (build_statement("vector"), build_statement("hybrid", fusion="zscore")):
        assert "embedding_half <=>" in str(statement) and "candidates" in str(statement)
    rrf = str(build_statement("hybrid", fusion="rrf"))
    assert "embedding_half" not in rrf and "s.embedding <=>" in rrf
    with pytest.raises(ValueError):
        build_statement("hybrid", fusion="rrf", precision="half")
