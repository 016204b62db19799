"""Hybrid retrieval: the full-text leg, synonyms, fusion, keyword fallback, sections, explain."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest
import sqlalchemy as sa

from service.db.engine import create_engine
from service.db.migrate import upgrade_database
from service.knowledge.articles import add_article
from service.retrieval.lexical import build_lexical_query, load_synonym_groups, synonym_variants
from service.retrieval.ranking import convex_relevance, rrf_relevance
from service.retrieval.search import RetrievalSettings, run_search
from service.runtime import Runtime

from .helpers import FailingEmbedder

HYBRID = RetrievalSettings(mode="hybrid", fusion="convex", vector_weight=0.8)
LEXICAL = RetrievalSettings(mode="lexical")
GROUPS = [["refund", "money back", "reimbursement"], ["shipping", "delivery"]]


@pytest.mark.parametrize("query, expected_variants, expected_added", [
    ("where is my order", ["where is my order"], []),
    ("How do I get my money back?", ["How do I get my money back?", "How do I get my refund?",
                                     "How do I get my reimbursement?"], ["refund", "reimbursement"]),
    ("Refund and shipping", ["Refund and shipping", "money back and shipping", "reimbursement and shipping",
                             "Refund and delivery"], ["money back", "reimbursement", "delivery"]),
    ("refunded items", ["refunded items"], []),  # whole words only
])
def test_synonym_variants_replace_one_matched_term_at_a_time(query, expected_variants, expected_added):
    assert synonym_variants(query, GROUPS) == (expected_variants, expected_added)


@pytest.mark.parametrize("similarity, lexical, weight, expected", [
    (0.8, 1.0, 0.8, 0.84), (0.8, None, 0.8, 0.64), (None, 0.5, 0.8, 0.1), (0.5, 0.5, 1.0, 0.5),
])
def test_convex_relevance_is_a_weighted_sum_with_missing_legs_as_zero(similarity, lexical, weight, expected):
    assert convex_relevance(similarity, lexical, weight) == pytest.approx(expected)


@pytest.mark.parametrize("vector_rank, lexical_rank, weight, expected", [
    (1, 1, 0.5, 1.0), (1, None, 1.0, 1.0), (1, None, 0.5, 0.5), (None, 1, 0.5, 0.5), (2, 1, 0.5, 0.5 * 61 / 62 + 0.5),
])
def test_rrf_relevance_is_scaled_so_first_in_both_legs_is_one(vector_rank, lexical_rank, weight, expected):
    assert rrf_relevance(vector_rank, lexical_rank, vector_weight=weight) == pytest.approx(expected)


def search(runtime, query, retrieval, limit=3, **kwargs):
    with runtime.session() as session:
        return run_search(session, runtime.embedder, query, limit=limit, weights=runtime.weights,
                          retrieval=retrieval, **kwargs)


def test_default_synonym_groups_are_seeded_by_the_migration(session):
    groups = load_synonym_groups(session)
    assert ["refund", "money back", "reimbursement"] in groups


def test_synonyms_let_keyword_search_find_refund_for_money_back(seeded):
    outcome = search(seeded, "I want my money back", LEXICAL)
    assert outcome.results[0].title == "How to request a refund"
    assert "refund" in outcome.results[0].explain.matched_terms
    assert "refund" in outcome.synonyms_used


def test_and_query_falls_back_to_or_when_it_finds_too_little(seeded):
    with seeded.session() as session:
        lexical = build_lexical_query(session, "password spaceship", [])
    assert lexical.and_query == "('password' & 'spaceship')"
    assert lexical.or_query == "'password' | 'spaceship'"
    outcome = search(seeded, "password spaceship", LEXICAL)
    assert outcome.lexical_match == "or"
    assert outcome.results[0].title == "Reset your password"


def test_lexical_mode_returns_only_articles_that_match(seeded):
    outcome = search(seeded, "spaceship", LEXICAL, limit=5)
    assert outcome.results == []


def test_exact_error_code_is_found_by_the_lexical_leg_when_the_embedding_misses_it(seeded):
    # Articles about secure connections and protocols that the embedding finds closer than the one that
    # names the exact code.
    with seeded.session() as session:
        for title, content in [
            ("SSL certificate errors on custom domains", "If your custom domain shows an SSL certificate error, "
             "renew the certificate and check the protocol version your server offers."),
            ("Secure connection and TLS protocol settings", "Our site requires TLS 1.2 or newer. Old browsers "
             "that only speak older SSL protocol versions show a secure connection error."),
            ("Browser security error pages", "A browser shows a security error page when it cannot verify the "
             "SSL connection. Protocol errors usually come from outdated browsers or antivirus software."),
        ]:
            add_article(session, seeded.embedder, {"title": title, "content": content, "category": "Technical"})
    query = "ERR_SSL_PROTOCOL_ERROR"

    hybrid = search(seeded, query, HYBRID, limit=10)
    target = next(r for r in hybrid.results if r.title == "Website not loading")
    assert target.explain.lexical_rank == 1
    assert target.explain.vector_rank > 1  # the embedding alone does not put it first
    assert {"err", "ssl", "protocol", "error"} <= set(target.explain.matched_terms)
    assert "**ERR**" in target.snippet or "**ERR_SSL_PROTOCOL_ERROR**" in target.snippet  # ts_headline
    assert search(seeded, query, LEXICAL).results[0].title == "Website not loading"


def test_hybrid_relevance_in_sql_equals_the_pure_fusion_functions(seeded):
    for retrieval in (HYBRID, replace(HYBRID, fusion="rrf", vector_weight=0.7)):
        outcome = search(seeded, "my card was declined at checkout", retrieval, limit=5)
        best_lexical = max(r.explain.lexical_score or 0 for r in outcome.results)
        assert best_lexical > 0
        for result in outcome.results:
            e = result.explain
            if retrieval.fusion == "convex":
                lexical_norm = (e.lexical_score or 0) / best_lexical if e.lexical_rank else None
                expected = convex_relevance(result.similarity, lexical_norm, retrieval.vector_weight)
            else:
                expected = rrf_relevance(e.vector_rank, e.lexical_rank, vector_weight=retrieval.vector_weight)
            assert result.relevance == pytest.approx(expected, abs=1e-9)
            assert result.score == pytest.approx(result.relevance * 0.8 + result.recency * 0.2 * result.importance)


def test_keyword_fallback_when_the_embedder_fails_says_degraded(seeded):
    with seeded.session() as session:
        down = FailingEmbedder(TimeoutError("provider timed out"), seeded.embedder.model_name)
        outcome = run_search(session, down, "reset password link", limit=3, weights=seeded.weights,
                             retrieval=RetrievalSettings(mode="vector"))
    assert outcome.degraded == "embedding unavailable"
    assert outcome.mode == "lexical"
    assert outcome.results[0].title == "Reset your password"
    assert outcome.results[0].similarity is None


def test_results_point_at_the_best_matching_section(seeded):
    outcome = search(seeded, "I no longer have access to the email address on my account",
                     RetrievalSettings(mode="vector"))
    top = outcome.results[0]
    assert top.title == "Reset your password"
    assert top.section == "Reset your password › If you no longer have access to your email"


def test_lexical_search_restores_the_statement_timeout(seeded):
    with seeded.session() as session:
        before = session.execute(sa.text("SHOW statement_timeout")).scalar_one()
        run_search(session, seeded.embedder, "refund", limit=3, weights=seeded.weights, retrieval=HYBRID)
        assert session.execute(sa.text("SHOW statement_timeout")).scalar_one() == before


def test_search_api_explain_returns_each_legs_evidence(client, seeded, app):
    app.extensions["supportrag"].__dict__["retrieval"] = HYBRID
    response = client.post("/api/search", json={"query": "money back for a damaged item", "explain": True})
    assert response.status_code == 200
    body = response.get_json()
    assert body["mode"] == "hybrid" and body["degraded"] is None
    assert "refund" in body["synonyms_used"]
    first = body["results"][0]
    assert first["title"] == "How to request a refund"
    assert set(first["explain"]) >= {"vector_rank", "lexical_rank", "matched_terms", "relevance", "recency",
                                     "importance", "score"}
    assert "refund" in first["explain"]["matched_terms"]


def test_search_api_rejects_a_non_boolean_explain(client):
    response = client.post("/api/search", json={"query": "refund", "explain": "yes"})
    assert response.status_code == 400
    assert response.get_json()["error"]["details"] == {"explain": "must be true or false"}


def test_the_lexical_leg_is_exact_a_weak_match_lifted_by_importance_is_never_dropped(runtime):
    """More matches than the old per-leg LIMIT of 200: the one that recency × importance lifts still wins."""
    model = runtime.embedder.model_name
    vector = "[" + ",".join(["0.02"] * 1536) + "]"
    with runtime.session() as session:
        session.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance,
                                        created_at)
            SELECT 'Zebra care ' || i, 'zebra zebra zebra stripes and zebra feeding, zebra ' || i, CAST(:v AS vector),
                   CAST(:v AS halfvec), :model, 0.0, now() - interval '400 days'
            FROM generate_series(1, 250) AS i
        """), {"v": vector, "model": model})
        lifted = session.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance,
                                        created_at)
            VALUES ('Safari news', 'A zebra among lions and giraffes.', CAST(:v AS vector),
                    CAST(:v AS halfvec), :model, 2.0, now()) RETURNING id
        """), {"v": vector, "model": model}).scalar_one()
        outcome = run_search(session, FailingEmbedder(model_name=model), "zebra", limit=3, weights=runtime.weights,
                             retrieval=LEXICAL)
    assert outcome.degraded == "embedding unavailable"
    assert outcome.results[0].id == lifted  # lowest BM25 of 251 matches, first by the formula


def test_a_hybrid_search_whose_keyword_leg_times_out_answers_by_vector_and_says_so(fresh_database_url, settings,
                                                                                     local_embedder):
    """The ranking statement is held on a lock (as a slow BM25 of common words would hold it) past the timeout."""
    runtime = Runtime(replace(settings, database_url=fresh_database_url), create_engine(fresh_database_url),
                      local_embedder)
    try:
        upgrade_database(runtime.engine)
        assert runtime.seed() == 5
        hybrid = replace(runtime.retrieval, mode="hybrid", statement_timeout_ms=300)
        with psycopg.connect(fresh_database_url.replace("+psycopg", "")) as blocker:
            blocker.execute("LOCK TABLE bm25_totals IN ACCESS EXCLUSIVE MODE")  # only the ranking reads it
            with runtime.session() as session:
                outcome = run_search(session, runtime.embedder, "reset password link", limit=3,
                                     weights=runtime.weights, retrieval=hybrid)
                timeout_after = session.execute(sa.text("SHOW statement_timeout")).scalar_one()
        assert (outcome.mode, outcome.degraded) == ("vector", "keyword search timed out")
        assert outcome.results[0].title == "Reset your password" and outcome.results[0].similarity > 0.3
        assert timeout_after == "0"  # restored for whatever the session runs next
        with runtime.session() as session:  # once the lock is gone, hybrid again
            assert run_search(session, runtime.embedder, "reset password link", limit=3, weights=runtime.weights,
                              retrieval=hybrid).degraded is None
    finally:
        runtime.engine.dispose()
