"""Where the default vector search's time goes: the whole statement against its parts, timed alone.

Run by hand, on a schema that ``bench/search.py --keep-schema NAME`` loaded:
    python bench/search_parts.py NAME [--queries 10]
Interleaved per query (warm: every query runs twice, the second round is timed), p50 and min of:
- ``default``: the service's vector statement (half-precision scan of search_vectors, re-score, vector_rank);
- ``no_vector_rank``: the same without ``explain.vector_rank``;
- ``scan``: the scan of search_vectors and its per-article aggregate alone;
- ``scan_join``: the same joined to the eligible articles and their recency;
- ``eligible``: the eligible articles and their recency alone.
Prints one JSON line (not appended to the results: a profile, not a benchmark).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime

import numpy as np
import sqlalchemy as sa
from psycopg import sql

from service.config import Settings
from service.db.engine import create_engine, resolve_database_url
from service.retrieval.fragments import ELIGIBLE_WHERE, RECENCY
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, _margins, build_statement

MODEL = "bench-model"  # bench/search.py's
HALF_QUERY = "CAST(l2_normalize(CAST(:query_vector AS vector)) AS halfvec)"
SCAN = f"""SELECT article_id, min(embedding_half <=> {HALF_QUERY}) AS distance FROM search_vectors
WHERE embedding_model = :model GROUP BY article_id"""
ELIGIBLE = f"SELECT kb.id, kb.importance, {RECENCY} AS recency FROM knowledge_base kb WHERE {ELIGIBLE_WHERE}"


def statements() -> dict[str, sa.TextClause]:
    """The statement and its parts."""
    default = build_statement("vector")
    text = default.text
    rank = text[text.index("(SELECT 1 + cardinality(h.ids)"):text.index("AS vector_rank")]
    binds = [b for key, b in default._bindparams.items() if key != "similarity_margin"]
    return {
        "default": default,
        "no_vector_rank": sa.text(text.replace(rank, "NULL::bigint ")).bindparams(*binds),
        "scan": sa.text(f"SELECT sum(distance) FROM ({SCAN}) u"),
        "scan_join": sa.text(f"WITH eligible AS MATERIALIZED ({ELIGIBLE}) SELECT max(e.recency - u.distance) "
                             f"FROM eligible e JOIN ({SCAN}) u ON u.article_id = e.id"),
        "eligible": sa.text(f"SELECT sum(recency) FROM ({ELIGIBLE}) e"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("schema")
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args()
    engine = create_engine(resolve_database_url(Settings.from_env()), pool_size=1,
                           search_path=sql.SQL("{},public").format(sql.Identifier(args.schema)).as_string(None))
    parts, rng = statements(), np.random.default_rng(1)
    weights, retrieval, now = RankingWeights(), RetrievalSettings(mode="vector"), datetime.now(UTC)
    times: dict[str, list[float]] = {name: [] for name in parts}
    with engine.connect() as conn:
        sections = conn.execute(sa.text("SELECT embedding FROM knowledge_sections ORDER BY id LIMIT :n OFFSET 777"),
                                {"n": args.queries}).scalars()
        queries = []
        for section in sections:  # a stored section, moved a little: a query near real content
            vector = np.asarray(section.to_numpy(), dtype=np.float32)
            vector += 0.05 * rng.standard_normal(len(vector)).astype(np.float32)
            queries.append(vector / np.linalg.norm(vector))
        for round_ in range(2):
            for query in queries:
                params = {"query_vector": query, "model": MODEL, "limit": 10, "now": now, "window_days": 365.0,
                          "similarity_weight": 0.8, "recency_weight": 0.2, "source_prefix": None,
                          **_margins(query, weights, retrieval)}
                for name, statement in parts.items():
                    started = time.perf_counter()
                    conn.execute(statement, params).all()
                    if round_:
                        times[name].append((time.perf_counter() - started) * 1000)
    print(json.dumps({name: {"p50_ms": round(statistics.median(t), 1), "min_ms": round(min(t), 1)}
                      for name, t in times.items()}))
    engine.dispose()


if __name__ == "__main__":
    main()
