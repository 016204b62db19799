"""The opt-in approximate mode: HNSW candidates on the half-precision vectors, ranked by the exact formula."""

from datetime import datetime, timedelta, timezone

import numpy as np
import sqlalchemy as sa

from service.retrieval.approximate import approximate_candidates, build_approximate_index, candidates_statement
from service.retrieval.ranking import RankingWeights
from service.retrieval.search import run_search
from service.retrieval.sql import RetrievalSettings, rank_articles

from .helpers import run_cli, run_cli_json

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MODEL = "test-model"
WIDTH = 384


def insert_corpus(session, rng: np.random.Generator, articles: int, sections: int) -> None:
    for number in range(articles):
        vectors = rng.standard_normal((sections + 1, WIDTH)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        article_id = session.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance,
                                        created_at)
            VALUES (:title, :title, :padded, CAST(CAST(:card AS vector) AS halfvec), :model, :importance, :created)
            RETURNING id
        """), {"title": f"article {number}", "padded": np.pad(vectors[0], (0, 1536 - WIDTH)), "card": vectors[0],
               "model": MODEL, "importance": float(rng.uniform(0, 2)),
               "created": NOW - timedelta(days=float(rng.uniform(0, 400)))}).scalar_one()
        for ordinal, vector in enumerate(vectors[1:]):
            session.execute(sa.text("""
                INSERT INTO knowledge_sections (article_id, ordinal, content, char_start, char_end, content_sha256,
                                                embedding, embedding_model)
                VALUES (:article_id, :ordinal, 'section', 0, 1, 'x', :embedding, :model)
            """), {"article_id": article_id, "ordinal": ordinal, "embedding": vector, "model": MODEL})


def rank(session, query, retrieval):
    return [(r.id, r.score, r.section_id) for r in rank_articles(
        session, query, model=MODEL, limit=10, weights=RankingWeights(), retrieval=retrieval, now=NOW)]


def test_the_approximate_mode_ranks_the_hnsw_candidates_by_the_exact_formula(session):
    rng = np.random.default_rng(4)
    insert_corpus(session, rng, 150, 2)
    built = build_approximate_index(session, MODEL)
    assert (built.width, built.names) == (WIDTH, ["search_vectors_sections_hnsw", "search_vectors_cards_hnsw"])
    query = rng.standard_normal(WIDTH).astype(np.float32)

    # Enough candidates to hold every article: the same ranking as the exact scan, scores included.
    everything = RetrievalSettings(approximate=True, approximate_candidates=1000, ef_search=1000)
    assert rank(session, query, everything) == rank(session, query, RetrievalSettings())

    # Few candidates: only their articles are ranked, and the index is what finds them.
    few = approximate_candidates(session, query, model=MODEL, candidates=3, ef_search=40)
    assert 1 <= len(few) <= 6
    ranked = rank(session, query, RetrievalSettings(approximate=True, approximate_candidates=3))
    assert {row[0] for row in ranked} == set(few)
    session.execute(sa.text("SET LOCAL enable_seqscan = off"))
    plan = "\n".join(session.execute(sa.text("EXPLAIN " + str(candidates_statement(WIDTH))),
                                     {"query_vector": query, "model": MODEL, "candidates": 3}).scalars())
    assert "search_vectors_sections_hnsw" in plan and "search_vectors_cards_hnsw" in plan


def test_results_say_exact_false_only_in_the_approximate_mode(session, local_embedder):
    exact = run_search(session, local_embedder, "reset my password", retrieval=RetrievalSettings())
    approximate = run_search(session, local_embedder, "reset my password",
                             retrieval=RetrievalSettings(approximate=True))
    lexical = run_search(session, local_embedder, "reset my password",
                         retrieval=RetrievalSettings(mode="lexical", approximate=True))
    assert (exact.exact, approximate.exact, lexical.exact) == (True, False, True)


def test_db_hnsw_builds_the_indexes_that_stats_then_names_and_search_reports_exact_false(cli_env, monkeypatch):
    run_cli("seed")
    assert "search_vectors_sections_hnsw" in run_cli("db", "hnsw").stdout
    index = run_cli_json("stats")["index"]
    assert index["name"] == "search_vectors_sections_hnsw" and "halfvec(384)" in index["definition"]
    monkeypatch.setenv("SEARCH_APPROXIMATE", "1")
    [first] = run_cli_json("search", "I forgot my password", "--limit", "1")
    assert first["title"] == "Reset your password"


def test_the_search_api_says_whether_results_are_proven_exact(client, seeded):
    response = client.post("/api/search", json={"query": "reset my password"})
    assert response.status_code == 200 and response.get_json()["exact"] is True
