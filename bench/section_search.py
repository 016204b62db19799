"""Search latency with sections: the service's exact search over N articles × S sections vs over N article vectors.

Run by hand:  python bench/section_search.py [--articles 10000] [--sections-per-article 5] [--queries 30]
Loads synthetic clustered unit vectors (MiniLM's 384 dimensions, stored as the service stores them: bench/search.py's
loader) with random importance (0-2) and ages (0-730 days) into a throwaway schema migrated like the real one,
with COPY … FORMAT BINARY, then times the product's search statement (service/retrieval/sql.py) per query for
granularity "article" (one vector per article: what the service did before sections) and "section" (the
default: best of the article's own vector and its sections'). Prints one JSON line; appends it to
bench/results/section_search.jsonl.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from search import SyntheticVectors, load  # bench/search.py's loader: rows as the service stores them
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles

RESULTS = Path(__file__).resolve().parent / "results" / "section_search.jsonl"
MODEL, DIMENSIONS, CLUSTERS = "bench-model", 384, 64  # bench/search.py's model name


def time_searches(engine: sa.Engine, queries: np.ndarray, granularity: str) -> list[float]:
    """Milliseconds per search, warm cache (one warm-up query first)."""
    timings = []
    with engine.connect() as connection:
        session = Session(bind=connection)
        settings = RetrievalSettings(granularity=granularity)
        for index, query in enumerate([queries[0], *queries]):
            started = time.perf_counter()
            rank_articles(session, query, model=MODEL, limit=10, weights=RankingWeights(), retrieval=settings,
                          now=datetime.now(timezone.utc))
            if index:
                timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=10_000)
    parser.add_argument("--sections-per-article", type=int, default=5)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    centres = rng.standard_normal((CLUSTERS, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    source = SyntheticVectors(rng, centres)
    base_url = resolve_database_url(Settings.from_env())
    with throwaway_schema(base_url, "bench_sections") as engine:
        with engine.begin() as conn:
            started = time.perf_counter()
            load(conn.connection.driver_connection, rng, args.articles, args.sections_per_article, source,
                 datetime.now(timezone.utc))
            conn.exec_driver_sql("ANALYZE knowledge_base")
            conn.exec_driver_sql("ANALYZE knowledge_sections")
            load_s = time.perf_counter() - started
        queries = source.queries(args.queries)
        article = time_searches(engine, queries, "article")
        section = time_searches(engine, queries, "section")
    result = {
        "articles": args.articles, "sections": args.articles * args.sections_per_article, "queries": args.queries,
        "article_p50_ms": round(statistics.median(article), 1),
        "article_p95_ms": round(sorted(article)[int(0.95 * (len(article) - 1))], 1),
        "section_p50_ms": round(statistics.median(section), 1),
        "section_p95_ms": round(sorted(section)[int(0.95 * (len(section) - 1))], 1),
        "section_vs_article": round(statistics.median(section) / statistics.median(article), 2),
        "load_s": round(load_s, 1), "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "date": datetime.now(timezone.utc).date().isoformat(),
    }
    report(RESULTS, result)


if __name__ == "__main__":
    main()
