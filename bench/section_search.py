"""Search latency with sections: the service's exact search over N articles × S sections vs over N article vectors.

Run by hand:  python bench/section_search.py [--articles 10000] [--sections-per-article 5] [--queries 30]
Loads synthetic clustered unit vectors (MiniLM's 384 dimensions, zero-padded to 1536 as the service stores
them) with random importance (0-2) and ages (0-730 days) into a throwaway schema migrated like the real one,
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles

RESULTS = Path(__file__).resolve().parent / "results" / "section_search.jsonl"
MODEL, DIMENSIONS, CLUSTERS = "bench-model", 384, 64


def clustered(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    """Unit vectors around random cluster centres (a Gaussian mixture), padded to 1536."""
    picks = centres[rng.integers(0, len(centres), count)]
    vectors = picks + 0.35 * rng.standard_normal((count, DIMENSIONS)) / np.sqrt(DIMENSIONS)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.pad(vectors.astype(np.float32), ((0, 0), (0, 1536 - DIMENSIONS)))


def load(conn, rng: np.random.Generator, articles: int, per_article: int, centres: np.ndarray) -> None:
    """Articles and sections through COPY … FORMAT BINARY."""
    now = datetime.now(timezone.utc)
    cards = clustered(rng, centres, articles)
    with conn.cursor().copy("COPY knowledge_base (id, title, content, embedding, embedding_model, importance, "
                            "created_at) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "text", "vector", "text", "float8", "timestamptz"])
        for i in range(articles):
            copy.write_row((i + 1, f"article {i}", f"content {i}", cards[i], MODEL, float(rng.uniform(0, 2)),
                            now - timedelta(days=float(rng.uniform(0, 730)))))
    sections = clustered(rng, centres, articles * per_article)
    columns = ("article_id, ordinal, heading_path, content, char_start, char_end, content_sha256, embedding, "
               "embedding_model")
    with conn.cursor().copy(f"COPY knowledge_sections ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "text[]", "text", "int4", "int4", "text", "vector", "text"])
        for i in range(articles):
            for j in range(per_article):
                copy.write_row((i + 1, j, [f"part {j}"], f"section {j}", 0, 1, f"{i}-{j}",
                                sections[i * per_article + j], MODEL))
    conn.execute("ANALYZE knowledge_base")
    conn.execute("ANALYZE knowledge_sections")


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
    base_url = resolve_database_url(Settings.from_env())
    with throwaway_schema(base_url, "bench_sections") as engine:
        with engine.begin() as conn:
            started = time.perf_counter()
            load(conn.connection.driver_connection, rng, args.articles, args.sections_per_article, centres)
            load_s = time.perf_counter() - started
        queries = clustered(rng, centres, args.queries)
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
