"""Pruned BM25 (service.retrieval.bm25_prune): the same top-k as a brute force, while scoring fewer articles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.retrieval import bm25_prune
from service.retrieval import sql as retrieval_sql
from service.retrieval.bm25 import build_bm25_query, lexical_leg
from service.retrieval.bm25_prune import formula_leg, lexical_top_leg
from service.retrieval.ranking import RankingWeights, final_score, recency
from service.retrieval.search import RetrievalSettings, run_search

from .helpers import FailingEmbedder
from .test_bm25 import MODEL, VOCABULARY, brute_force_bm25, insert_unit_article

NOW = datetime(2026, 6, 1, tzinfo=UTC)
COMMON, RARE = VOCABULARY[:3], VOCABULARY[3:9]  # most units have a common word, few a rare one
BINDS = [sa.bindparam("bm25_k1", type_=sa.Double), sa.bindparam("bm25_b", type_=sa.Double),
         sa.bindparam("bm25_title_weight", type_=sa.Double),
         sa.bindparam("now", type_=sa.DateTime(timezone=True)), sa.bindparam("window_days", type_=sa.Double),
         sa.bindparam("similarity_weight", type_=sa.Double), sa.bindparam("recency_weight", type_=sa.Double)]

skewed_words = st.builds(lambda common, rare: common + rare, st.lists(st.sampled_from(COMMON), min_size=1, max_size=8),
                         st.lists(st.sampled_from(RARE), max_size=1))
articles = st.lists(st.tuples(
    skewed_words, st.lists(st.tuples(skewed_words, st.sampled_from(["text", "text", "heading"])), max_size=3),
    st.sampled_from([MODEL, MODEL, MODEL, "other-model"]), st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0]),
    st.sampled_from([0, 0, 30, 200, 400])), min_size=1, max_size=20)
queries = st.lists(st.sampled_from(COMMON + RARE), min_size=1, max_size=4)


def store(session, corpus) -> list[tuple]:
    """The corpus alone in the tables (N and df are its own); (id, title, sections, model) per article."""
    session.execute(sa.text("DELETE FROM knowledge_base"))
    return [(insert_unit_article(session, title, sections, model, importance, NOW - timedelta(days=age)),
             title, sections, model) for title, sections, model, importance, age in corpus]


def ranked(scores: dict[int, float]) -> list[int]:
    """Ids by score, ties by id (scores rounded: SQL and Python sum in different orders)."""
    return sorted(scores, key=lambda article_id: (-round(scores[article_id], 9), article_id))


def leg_params(session, query: list[str], **extra) -> dict:
    built = build_bm25_query(session, " ".join(query), [])
    return {"terms": built.terms, "tsquery": built.any_term, "bm25_k1": 1.2, "bm25_b": 0.75,
            "bm25_title_weight": 3.0, "model": MODEL, "source_prefix": None, "now": NOW, "window_days": 365.0, "similarity_weight": 0.8,
            "recency_weight": 0.2, **extra}


def run_leg(session, ctes: str, select: str, params: dict) -> list:
    statement = sa.text(f"WITH {ctes}\n{select}").bindparams(*(b for b in BINDS if f":{b.key}" in ctes))
    return session.execute(statement, params).all()


@pytest.fixture
def small_seeds(monkeypatch):
    """Statements built afresh with the seed constants a test sets (build_statement caches otherwise)."""
    monkeypatch.setattr(retrieval_sql, "build_statement", retrieval_sql.build_statement.__wrapped__)
    return lambda extra, terms: (monkeypatch.setattr(bm25_prune, "SEED_EXTRA", extra),
                                 monkeypatch.setattr(bm25_prune, "SEED_TERMS", terms))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=articles, query=queries, limit=st.integers(1, 5), seed_extra=st.sampled_from([0, 1, 32]),
       seed_terms=st.sampled_from([1, 4]))
def test_the_lexical_modes_pruned_top_k_is_a_brute_force_formula_top_k(session, small_seeds, corpus, query, limit,
                                                                        seed_extra, seed_terms):
    small_seeds(seed_extra, seed_terms)
    savepoint = session.begin_nested()
    try:
        stored = store(session, corpus)
        bm25 = brute_force_bm25(stored, query, 1.2, 0.75)
        best = max(bm25.values(), default=1.0)
        boosts = {article_id: (importance, age) for (article_id, *_), (*_, importance, age) in zip(stored, corpus)}
        formula = {a: final_score(s / best, recency(boosts[a][1]), boosts[a][0], RankingWeights())
                   for a, s in bm25.items()}
        outcome = run_search(session, FailingEmbedder(model_name=MODEL), " ".join(query), limit=limit, now=NOW,
                             retrieval=RetrievalSettings(mode="lexical"))
        assert [result.id for result in outcome.results] == ranked(formula)[:limit]
        by_bm25 = ranked(bm25)
        for result in outcome.results:
            assert result.explain.lexical_score == pytest.approx(bm25[result.id], rel=1e-9)
            assert result.explain.lexical_rank == by_bm25.index(result.id) + 1
    finally:
        savepoint.rollback()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=articles, query=queries, pool=st.integers(1, 6), seed_extra=st.sampled_from([0, 32]))
def test_the_hybrid_pool_is_the_exact_bm25_top_pool_and_any_articles_bm25_is_exact(session, monkeypatch, corpus,
                                                                                   query, pool, seed_extra):
    monkeypatch.setattr(bm25_prune, "SEED_EXTRA", seed_extra)
    savepoint = session.begin_nested()
    try:
        stored = store(session, corpus)
        bm25 = brute_force_bm25(stored, query, 1.2, 0.75)
        params = leg_params(session, query, pool=pool)
        top = run_leg(session, lexical_top_leg(":pool"),
                      "SELECT id, lexical_score FROM lexical_top ORDER BY lexical_score DESC, id", params)
        assert [row.id for row in top] == ranked(bm25)[:pool]
        chosen = [article_id for article_id, *_, model in stored if model == MODEL][::2]
        rows = run_leg(session, "chosen AS (SELECT unnest(CAST(:ids AS bigint[])) AS id),\n" + lexical_leg("chosen"),
                       "SELECT id, lexical_score FROM lexical", {**params, "ids": chosen})
        assert {row.id: row.lexical_score for row in rows} == pytest.approx(
            {a: s for a, s in bm25.items() if a in chosen}, rel=1e-9)
    finally:
        savepoint.rollback()


def test_a_rare_term_keeps_the_common_terms_matches_unscored(session):
    rare = insert_unit_article(session, ["garnet", "zinc"], [(["garnet", "garnet", "zinc"], "text")])
    for _ in range(60):
        insert_unit_article(session, ["zinc", "cobalt"], [(["zinc", "cobalt", "zinc"], "text")])
    params = leg_params(session, ["garnet", "zinc"], limit=1)
    scored = run_leg(session, formula_leg(), "SELECT id FROM lexical", params)
    outcome = run_search(session, FailingEmbedder(model_name=MODEL), "garnet zinc", limit=1,
                         retrieval=RetrievalSettings(mode="lexical"))
    assert [result.id for result in outcome.results] == [rare]
    assert outcome.results[0].explain.lexical_rank == 1
    assert len(scored) <= 1 + 1 + bm25_prune.SEED_EXTRA  # the rare article and the seeds, not the 60


def test_an_article_the_boost_lifts_is_found_though_its_terms_alone_could_not_reach_the_best_bm25(session,
                                                                                                  small_seeds):
    small_seeds(0, 1)  # θ from the rare article alone: "cobalt" (ceiling 5.4 < its BM25 5.7) is not essential
    rare = insert_unit_article(session, ["garnet"], [(["garnet"] * 3, "text")], importance=0.0,
                               created_at=NOW - timedelta(days=400))
    lifted = [insert_unit_article(session, ["cobalt"], [(["cobalt", "cobalt"], "text")], importance=2.0,
                                  created_at=NOW) for _ in range(4)]
    for _ in range(45):
        insert_unit_article(session, ["zinc"], [(["zinc", "quartz"], "text")], importance=1.0, created_at=NOW)
    outcome = run_search(session, FailingEmbedder(model_name=MODEL), "garnet cobalt", limit=1, now=NOW,
                         retrieval=RetrievalSettings(mode="lexical"))
    [best] = outcome.results  # 0.8 × 3.7/5.7 + 0.2 × 2 = 0.93 against the rare article's 0.8
    assert best.id == lifted[0] != rare and best.explain.lexical_rank == 2


@pytest.mark.parametrize("with_vector", [True, False])
def test_the_lexical_statement_prunes_and_reads_no_vector_but_the_top_ks(with_vector):
    text = retrieval_sql.build_statement("lexical", with_vector=with_vector).text
    assert "lexical_second_articles" in text and "lexical_seed_articles" in text
    assert "half_leg" not in text and "embedding_half" not in text  # no scan of every match's vectors
