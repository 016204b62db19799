"""Similar solved tickets at 100k and 1M: p50/p95 latency, recall@10 against the exact scan, build time, index size.

Real text: MiniLM vectors (bench/realdata.py, cached) of real short texts, the npm package summaries, plus every
question of the shared dev sets (../shared/eval). Extended to ``--rows`` by repeating each real vector with small
Gaussian noise (``--noise`` per dimension, then renormalised: a copy sits at cosine ~0.86 from its source with the
default 0.03), as a help desk sees the same question asked many ways. Queries are held-out real texts (npm summaries
not in the corpus, embedded the same way). 90 % of the tickets are solved (the index and the query filter on it).

Into a throwaway schema migrated like the real one (``ticket_vectors``' foreign key to ``tickets`` is dropped there:
a read benchmark needs no ticket rows); loaded with COPY … FORMAT BINARY; the HNSW index is built after the load
(``build_ticket_index``, what ``supportrag db hnsw`` runs), timed. Each query goes through
``find_similar_tickets`` twice: forced exact (``exact_below`` huge) and forced HNSW (``exact_below=0``), warm.

    python bench/similar_tickets.py --rows 100000 1000000
    python bench/similar_tickets.py --rows 2000 5000 10000 20000 50000 --ef-search 100   # where exact stops paying
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from pgvector import HalfVector
from realdata import load_real_vectors
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.retrieval.ticket_neighbours import build_ticket_index, find_similar_tickets

RESULTS = Path(__file__).resolve().parent / "results" / "similar_tickets.jsonl"
EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval"
MODEL = "local:all-MiniLM-L6-v2"
COPY_SQL = "COPY ticket_vectors (ticket_id, embedding_model, embedding, solved_at) FROM STDIN WITH (FORMAT BINARY)"


def dev_questions() -> list[str]:
    """Every distinct query text of the shared dev sets."""
    texts: dict[str, None] = {}
    for path in sorted(EVAL.glob("*/queries.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.setdefault(json.loads(line)["text"].strip(), None)
    return list(texts)


def embed_questions(texts: list[str]) -> np.ndarray:
    """MiniLM vectors of the dev questions, cached beside bench/realdata.py's."""
    from realdata import CACHE  # the same ignored folder

    path = CACHE / f"dev-questions-{len(texts)}.npy"
    if path.exists():
        return np.load(path)
    from service.providers.embeddings import LocalEmbedder  # only on a cache miss: loads the model

    vectors = LocalEmbedder().embed(texts).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def expanded(base: np.ndarray, rows: int, noise: float, seed: int) -> np.ndarray:
    """``rows`` unit vectors: the real ones, then copies with Gaussian noise, renormalised."""
    rng = np.random.default_rng(seed)
    picks = np.arange(rows) % len(base)
    out = base[picks].astype(np.float32)
    noisy = np.arange(rows) >= len(base)
    out[noisy] += rng.standard_normal((int(noisy.sum()), base.shape[1])).astype(np.float32) * noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def load(engine: sa.Engine, vectors: np.ndarray) -> float:
    """COPY the vectors in (90 % solved); returns seconds."""
    solved_at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    started = time.perf_counter()
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cursor, cursor.copy(COPY_SQL) as copy:
            copy.set_types(["int8", "text", "halfvec", "timestamptz"])
            for i, vector in enumerate(vectors):
                copy.write_row([i + 1, MODEL, HalfVector(vector), solved_at if i % 10 else None])
        raw.commit()
    return time.perf_counter() - started


def prepare(engine: sa.Engine) -> None:
    """Drop the foreign key and the migration's index (it is rebuilt, timed, after the load)."""
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ticket_vectors DROP CONSTRAINT IF EXISTS ticket_vectors_ticket_id_fkey"))
        conn.execute(sa.text("DROP INDEX IF EXISTS ticket_vectors_hnsw_384"))
        conn.execute(sa.text("TRUNCATE ticket_vectors"))


def build(engine: sa.Engine, m: int, ef_construction: int, memory: str) -> dict:
    """Build the HNSW index (timed), VACUUM ANALYZE; its size."""
    with Session(engine) as session:
        session.execute(sa.text("SELECT set_config('maintenance_work_mem', :m, true)"), {"m": memory})
        session.execute(sa.text("SELECT set_config('max_parallel_maintenance_workers', '1', true)"))
        started = time.perf_counter()
        name = build_ticket_index(session, 384, m=m, ef_construction=ef_construction)
        session.commit()
        seconds = time.perf_counter() - started
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE ticket_vectors"))
        size, table = conn.execute(sa.text(
            "SELECT pg_relation_size(to_regclass(:n)), pg_relation_size('ticket_vectors')"), {"n": name}).one()
    return {"build_s": round(seconds, 1), "index_mb": round(size / 2**20), "table_mb": round(table / 2**20)}


def timed(session: Session, query: np.ndarray, exact_below: int, ef_search: int) -> tuple[float, list[int]]:
    started = time.perf_counter()
    found = find_similar_tickets(session, query, model=MODEL, limit=10, exact_below=exact_below,
                                 ef_search=ef_search)
    seconds = time.perf_counter() - started
    session.rollback()  # each call in its own transaction, as a request's
    return seconds * 1000, [n.ticket_id for n in found]


def measure_exact(engine: sa.Engine, queries: np.ndarray) -> tuple[dict, list[list[int]]]:
    """p50/p95 of the exact scan, and its top-10s (the truth for recall)."""
    times, truths = [], []
    with Session(engine) as session:
        for query in queries[:3]:  # warm the cache and the plan
            timed(session, query, 10**12, 0)
        for query in queries:
            ms, truth = timed(session, query, 10**12, 0)
            times.append(ms)
            truths.append(truth)
    return {"exact_p50_ms": round(float(np.percentile(times, 50)), 1),
            "exact_p95_ms": round(float(np.percentile(times, 95)), 1)}, truths


def measure_hnsw(engine: sa.Engine, queries: np.ndarray, truths: list[list[int]], ef_search: int) -> dict:
    """p50/p95 through the index, recall@10 against the exact top-10s."""
    times, recalls = [], []
    with Session(engine) as session:
        for query in queries[:5]:
            timed(session, query, 0, ef_search)
        for query, truth in zip(queries, truths):
            ms, found = timed(session, query, 0, ef_search)
            times.append(ms)
            recalls.append(len(set(truth) & set(found)) / max(1, len(truth)))
    return {f"hnsw_p50_ms@{ef_search}": round(float(np.percentile(times, 50)), 1),
            f"hnsw_p95_ms@{ef_search}": round(float(np.percentile(times, 95)), 1),
            f"recall_at_10@{ef_search}": round(float(np.mean(recalls)), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--base", type=int, default=40_000, help="real npm summaries (plus the dev questions)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--noise", type=float, default=0.03, help="per-dimension noise of the copies")
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 100])
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--memory", default="3GB", help="maintenance_work_mem for the build")
    args = parser.parse_args()
    real = load_real_vectors(args.base, args.queries)
    base = np.vstack([real.corpus, embed_questions(dev_questions())])
    base_url = resolve_database_url(Settings.from_env())
    with throwaway_schema(base_url, "bench_similar") as engine:
        for rows in args.rows:
            prepare(engine)
            vectors = expanded(base, rows, args.noise, seed=rows)
            result = {"rows": rows, "real_vectors": len(base), "noise": args.noise, "m": args.m,
                      "ef_construction": args.ef_construction, "load_s": round(load(engine, vectors), 1)}
            del vectors
            result.update(build(engine, args.m, args.ef_construction, args.memory))
            exact, truths = measure_exact(engine, real.queries)
            result.update(exact)
            for ef_search in args.ef_search:
                result.update(measure_hnsw(engine, real.queries, truths, ef_search))
            result.update({"load_average": [round(x, 2) for x in os.getloadavg()],
                           "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                           "date": datetime.now(timezone.utc).isoformat(timespec="minutes")})
            report(RESULTS, result)


if __name__ == "__main__":
    main()
