"""Search latency right after a bulk import, before and after ``service.db.statistics.refresh_statistics``.

Run by hand:  SUPPORTRAG_DATA_DIR=artifacts/bench-analyze python bench/analyze_after_import.py [--articles 16000]
[--real]

Loads N articles (one section each; bench/search.py's loader: MiniLM's 384 dimensions, COPY … FORMAT BINARY, as an
import writes them): with ``--real``, MiniLM vectors of real short texts and held-out real queries (bench/realdata.py,
the same source as ``bench/search.py --real``), else the synthetic mixture, into a throwaway schema migrated like the real one, with autovacuum off on its
tables so that nothing analyzes them behind the bench's back (a fresh import, before autovacuum's next round).
Then it times the product's default search statement (service/retrieval/sql.py) per query, calls
``refresh_statistics`` with the rows written (what ``bulk_add_articles`` does after an import), and times the same
queries again. It also records the planner's row estimate for ``search_vectors`` (what the scan reads) each time.
Prints one JSON line; appends it to bench/results/analyze_after_import.jsonl.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import machine_facts, report
from search import RealVectorSource, SyntheticVectors, load  # bench/search.py's: rows as the service stores them
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.db.statistics import refresh_statistics
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles

RESULTS = Path(__file__).resolve().parent / "results" / "analyze_after_import.jsonl"
MODEL, DIMENSIONS, CLUSTERS = "bench-model", 384, 64  # bench/search.py's model name
TABLES = ("knowledge_base", "knowledge_sections", "search_vectors")


def time_searches(engine: sa.Engine, queries: np.ndarray) -> list[float]:
    """Milliseconds per search, warm cache (one warm-up query first)."""
    timings = []
    with engine.connect() as connection:
        session = Session(bind=connection)
        for index, query in enumerate([queries[0], *queries]):
            started = time.perf_counter()
            rank_articles(session, query, model=MODEL, limit=10, weights=RankingWeights(),
                          retrieval=RetrievalSettings(), now=datetime.now(timezone.utc))
            if index:
                timings.append((time.perf_counter() - started) * 1000)
    return timings


def planned_rows(engine: sa.Engine) -> int:
    """The planner's estimate of ``search_vectors``' rows."""
    with engine.connect() as connection:
        plan = connection.exec_driver_sql("EXPLAIN (FORMAT JSON) SELECT * FROM search_vectors").scalar_one()
    return int(plan[0]["Plan"]["Plan Rows"])


def summary(timings: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(timings), 1),
            "p95_ms": round(sorted(timings)[int(0.95 * (len(timings) - 1))], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=16_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--real", action="store_true", help="real text embeddings (bench/realdata.py), not synthetic")
    args = parser.parse_args()
    rng = np.random.default_rng(37)
    if args.real:
        source = RealVectorSource(args.articles, 1, args.queries, seed=37)
    else:
        centres = rng.standard_normal((CLUSTERS, DIMENSIONS))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        source = SyntheticVectors(rng, centres)
    load_before = os.getloadavg()
    with throwaway_schema(resolve_database_url(Settings.from_env()), "bench_analyze") as engine:
        with engine.begin() as conn:
            for table in TABLES:
                conn.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            load(conn.connection.driver_connection, rng, args.articles, 1, source, datetime.now(timezone.utc))
        queries = source.queries(args.queries)
        before_rows, before = planned_rows(engine), time_searches(engine, queries)
        with Session(engine) as session:
            started = time.perf_counter()
            analyzed = refresh_statistics(session, {"knowledge_base": args.articles,
                                                    "knowledge_sections": args.articles,
                                                    "search_vectors": 2 * args.articles})
            session.commit()
            analyze_s = time.perf_counter() - started
        after_rows, after = planned_rows(engine), time_searches(engine, queries)
    report(RESULTS, {
        "data": "real" if args.real else "synthetic", "articles": args.articles, "search_vectors": 2 * args.articles, "queries": args.queries,
        "before": {"planned_rows": before_rows, **summary(before)},
        "after": {"planned_rows": after_rows, **summary(after)},
        "analyzed": analyzed, "analyze_s": round(analyze_s, 2),
        "load_average": [round(v, 2) for v in (*load_before, *os.getloadavg())], **machine_facts(),
    })


if __name__ == "__main__":
    main()
