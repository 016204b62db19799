"""Exact-search scan time with the embedding stored PLAIN (in the heap) vs the default (TOASTed).

Run by hand:  python bench/toast_storage.py [--rows 20000] [--queries 20]
Creates two throwaway tables in the configured database (DATABASE_URL or the
embedded server), loads the same random 1536-d vectors into both with
COPY … FORMAT BINARY, and times the product's exact top-k query on each.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from service.config import Settings
from service.db.engine import resolve_database_url

QUERY = """
SELECT id, similarity * 0.8 + recency * 0.2 * importance AS score FROM (
    SELECT id, importance, 1.0 - (embedding <=> %(q)s) AS similarity,
           GREATEST(0.0, 1.0 - EXTRACT(EPOCH FROM (now() - created_at))::float8 / 86400.0 / 365.0) AS recency
    FROM {table} WHERE embedding IS NOT NULL
) scored ORDER BY score DESC, id LIMIT 10
"""


def load(conn, table: str, storage: str | None, vectors: np.ndarray, ages: np.ndarray) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding vector(1536), "
                 "importance float8 NOT NULL, created_at timestamptz NOT NULL)")
    if storage:
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE {storage}")
    now = datetime.now(timezone.utc)
    with conn.cursor().copy(f"COPY {table} (id, embedding, importance, created_at) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "vector", "float8", "timestamptz"])
        for i, (vector, age) in enumerate(zip(vectors, ages)):
            copy.write_row((i, vector, 1.0, now - timedelta(days=float(age))))
    conn.execute(f"VACUUM ANALYZE {table}")


def time_queries(conn, table: str, queries: np.ndarray) -> list[float]:
    timings = []
    for q in queries:
        start = time.perf_counter()
        conn.execute(QUERY.format(table=table), {"q": q}).fetchall()
        timings.append(time.perf_counter() - start)
    return timings


def table_size(conn, table: str) -> str:
    return conn.execute("SELECT pg_size_pretty(pg_total_relation_size(%s))", (table,)).fetchone()[0]


def machine_description() -> str:
    """CPU model, core count and memory, for the docs' benchmark tables."""
    import os

    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor() or platform.machine())
    mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return f"{model}, {os.cpu_count()} cores, {mem_kb / 1024 / 1024:.0f} GiB, {platform.machine()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    url = resolve_database_url(Settings.from_env()).replace("postgresql+psycopg://", "postgresql://")
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((args.rows, 1536)).astype(np.float32)
    queries = rng.standard_normal((args.queries, 1536)).astype(np.float32)
    ages = rng.uniform(0, 500, args.rows)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        variants = {"default (EXTERNAL/TOAST)": ("bench_toast_default", None),
                    "PLAIN (in heap)": ("bench_toast_plain", "PLAIN")}
        results = {}
        for label, (table, storage) in variants.items():
            load(conn, table, storage, vectors, ages)
            time_queries(conn, table, queries[:3])  # warm the cache
            results[label] = (statistics.median(time_queries(conn, table, queries)), table_size(conn, table))
        for table, _ in variants.values():
            conn.execute(f"DROP TABLE {table}")
    print(f"machine: {machine_description()}, python {platform.python_version()}")
    print(f"rows: {args.rows}, queries: {args.queries}, exact top-10 of the product formula (warm cache)")
    baseline = results["default (EXTERNAL/TOAST)"][0]
    for label, (median, size) in results.items():
        print(f"{label:26s} median {median * 1000:8.1f} ms  size {size:>8s}  ratio {median / baseline:.2f}×")


if __name__ == "__main__":
    main()
