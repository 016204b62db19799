"""Lexical and hybrid search latency: BM25 in PostgreSQL (now) against the ts_rank leg it replaced (before).

Run by hand:  python bench/bm25_search.py [--articles 20000] [--sections-per-article 5] [--queries 30]
Loads N synthetic articles × S sections into a throwaway schema migrated like the real one, with COPY … FORMAT
BINARY in chunks (the BM25 statistics triggers run once per chunk): text drawn from a Zipf vocabulary (a few very
common words, a long tail of rare ones: the shape of real text), clustered unit vectors as in
bench/section_search.py. Queries are 2–6 words drawn from the same law. Times, per query and warm:
- ``lexical_bm25``: the service's lexical statement (service/retrieval/sql.py, BM25 leg) after the query side
  (service/retrieval/bm25.py: terms, caps); ``lexical_ts_rank``: the same statement with the ts_rank leg of
  before (copied below verbatim), on the OR query of the same words (what the old path ran when fewer than k
  articles matched every word);
- ``hybrid_bm25`` / ``hybrid_ts_rank``: the hybrid statement (exact scan, no walk) with each leg.
Prints one JSON line; appends it to bench/results/bm25_search.jsonl.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from pgvector import HalfVector
from search import DIMENSIONS, MODEL, clustered, pad
from section_search import CLUSTERS
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.retrieval import sql as retrieval_sql
from service.retrieval.bm25 import LEXICAL_LEG, build_bm25_query
from service.retrieval.ranking import RankingWeights

RESULTS = Path(__file__).resolve().parent / "results" / "bm25_search.jsonl"
VOCABULARY, ZIPF, CHUNK = 50_000, 1.1, 5_000
# The lexical leg before BM25 (git 8e328f9, service/retrieval/sql.py), plus the column the final SELECT now reads.
TS_RANK_LEG = """lexical AS (
    SELECT kb.id, ts_rank(kb.search_vector, CAST(:tsquery AS tsquery))
               + CASE WHEN kb.search_vector @@ CAST(:and_tsquery AS tsquery) THEN 1.0 ELSE 0.0 END AS lexical_score
    FROM knowledge_base kb JOIN eligible e ON e.id = kb.id
    WHERE kb.search_vector @@ CAST(:tsquery AS tsquery)
),
lexical_ranked AS (
    SELECT id, lexical_score, NULL::bigint AS lexical_section_id,
           row_number() OVER (ORDER BY lexical_score DESC, id) AS lexical_rank,
           lexical_score / NULLIF(max(lexical_score) OVER (), 0) AS lexical_norm
    FROM lexical
)"""


def words(rng: np.random.Generator, count: int) -> str:
    """``count`` words of a Zipf law over the vocabulary (rank r is the word "w<r>")."""
    ranks = rng.zipf(ZIPF, count)
    return " ".join(f"w{rank}" for rank in np.minimum(ranks, VOCABULARY))


def load(conn, rng: np.random.Generator, articles: int, per_article: int, centres: np.ndarray) -> None:
    """Articles and their sections, chunk by chunk (one trigger run per COPY statement)."""
    now = datetime.now(timezone.utc)
    columns = ("article_id, ordinal, heading_path, content, char_start, char_end, content_sha256, embedding, "
               "embedding_model")
    for start in range(0, articles, CHUNK):
        count = min(CHUNK, articles - start)
        bodies = [[words(rng, int(rng.integers(40, 120))) for _ in range(per_article)] for _ in range(count)]
        cards, sections = clustered(rng, centres, count), clustered(rng, centres, count * per_article)
        with conn.cursor().copy("COPY knowledge_base (id, title, content, embedding, embedding_half, embedding_model, "
                                "importance, created_at) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "text", "vector", "halfvec", "text", "float8", "timestamptz"])
            for i in range(count):
                copy.write_row((start + i + 1, words(rng, 6), "\n\n".join(bodies[i]), pad(cards[i]),
                                HalfVector(cards[i]), MODEL, float(rng.uniform(0, 2)),
                                now - timedelta(days=float(rng.uniform(0, 730)))))
        with conn.cursor().copy(f"COPY knowledge_sections ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int4", "text[]", "text", "int4", "int4", "text", "vector", "text"])
            for i in range(count):
                for j in range(per_article):
                    copy.write_row((start + i + 1, j, [], bodies[i][j], 0, 1, f"{start + i}-{j}",
                                    sections[i * per_article + j], MODEL))
    conn.execute("ANALYZE knowledge_base")
    conn.execute("ANALYZE knowledge_sections")


def statement(mode: str, leg: str) -> sa.TextClause:
    """The service's statement for ``mode`` with the BM25 leg, or with the ts_rank leg swapped in."""
    built = retrieval_sql.build_statement(mode, with_vector=True)
    if leg == "bm25":
        return built
    text = built.text.replace(LEXICAL_LEG + ",\n" + retrieval_sql._LEXICAL_RANKED, TS_RANK_LEG)
    assert text != built.text
    return sa.text(text).bindparams(*(bind for name, bind in built._bindparams.items() if f":{name}" in text))


def time_search(session: Session, query_vector: np.ndarray, text: str, mode: str, leg: str) -> float:
    """Milliseconds for the query side and one statement."""
    started = time.perf_counter()
    query = build_bm25_query(session, text, [])
    params = {"query_vector": query_vector, "tsquery": query.any_term, "and_tsquery": query.all_terms,
              "lexemes": query.terms, "terms": query.terms, "model": MODEL, "limit": 10,
              "now": datetime.now(timezone.utc), "window_days": 365.0, "similarity_weight": 0.8,
              "recency_weight": 0.2, "vector_weight": 0.95, "rrf_k": 60.0, "source_prefix": None,
              "candidate_ids": None, "bm25_k1": 1.2, "bm25_b": 0.75}
    if leg == "ts_rank":  # the old OR query: every word of the query (not only those the corpus has)
        params["tsquery"] = session.execute(sa.text(
            "SELECT replace(plainto_tsquery('english', :q)::text, ' & ', ' | ')"), {"q": text}).scalar_one()
        params["and_tsquery"] = session.execute(sa.text("SELECT plainto_tsquery('english', :q)::text"),
                                                {"q": text}).scalar_one()
    session.execute(statement(mode, leg), params).all()
    return (time.perf_counter() - started) * 1000


def percentiles(timings: list[float]) -> tuple[float, float]:
    ordered = sorted(timings)
    return round(statistics.median(ordered), 1), round(ordered[int(0.95 * (len(ordered) - 1))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--sections-per-article", type=int, default=5)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    centres = rng.standard_normal((CLUSTERS, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    result: dict = {"articles": args.articles, "sections": args.articles * args.sections_per_article,
                    "queries": args.queries}
    with throwaway_schema(resolve_database_url(Settings.from_env()), "bench_bm25") as engine:
        with engine.begin() as conn:
            started = time.perf_counter()
            load(conn.connection.driver_connection, rng, args.articles, args.sections_per_article, centres)
            result["load_s"] = round(time.perf_counter() - started, 1)
        vectors = clustered(rng, centres, args.queries)
        texts = [words(rng, int(rng.integers(2, 7))) for _ in range(args.queries)]
        with engine.connect() as connection:
            session = Session(bind=connection)
            for mode in ("lexical", "hybrid"):
                for leg in ("bm25", "ts_rank"):
                    time_search(session, vectors[0], texts[0], mode, leg)  # warm-up
                    timings = [time_search(session, v, t, mode, leg) for v, t in zip(vectors, texts)]
                    result[f"{mode}_{leg}_p50_ms"], result[f"{mode}_{leg}_p95_ms"] = percentiles(timings)
    result.update(machine=f"{platform.machine()}, {platform.processor() or 'cpu'}",
                  date=datetime.now(timezone.utc).date().isoformat())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
