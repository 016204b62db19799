"""Search latency and recall: naive ORDER BY of the formula vs the exact scan vs the exact walk.

Run by hand:  python bench/search.py --articles 100000 --sections-per-article 5 --queries 50
Loads clustered synthetic unit vectors (a Gaussian mixture in MiniLM's 384 dimensions, zero-padded to 1536 as the
service stores them), random importance 0-2 and ages 0-730 days, through COPY … FORMAT BINARY into a throwaway
schema migrated like the real one, then fits the walk's clusters with the service's own
``supportrag db cluster`` code (timed; index = the two btrees + the clusters table, sized). Then per query (warm
cache: each query once untimed, then once timed; limit 10):
- naive: one ``ORDER BY`` of the formula over every article joined to all of its sections;
- exact: the service's exact scan (service/retrieval/sql.py, walk off);
- index: the service's exact walk (service/retrieval/walk.py, default budget) with its exact re-score;
recall@3 / @10 of naive and index against the exact scan (the reference), p50/p95/p99 per strategy, the rows the
walk read (median), and how many walks handed over to the scan (budget). Prints one JSON line per strategy and a
last summary line; appends the summary to bench/results/search.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from realdata import group_into_articles, load_real_vectors
from psycopg import sql
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import create_engine, resolve_database_url
from service.db.migrate import upgrade_database
from service.knowledge.clusters import rewrite_vector_tables, train_clusters
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles
from service.retrieval.walk import walk_candidates

RESULTS = Path(__file__).resolve().parent / "results" / "search.jsonl"
MODEL, DIMENSIONS, LIMIT = "bench-model", 384, 10
WALK_BUDGET = RetrievalSettings().walk_budget  # the service's default
WEIGHTS = RankingWeights()

# The naive statement: what a first version writes. Every article, every section, then sort.
NAIVE_SQL = sa.text("""
SELECT kb.id,
       GREATEST(1.0 - (kb.embedding <=> CAST(:q AS vector)), max(1.0 - (s.embedding <=> CAST(:q AS vector)))) * 0.8
       + LEAST(1.0, GREATEST(0.0, 1.0 - EXTRACT(EPOCH FROM (:now - kb.created_at)) / 86400.0 / 365.0))
         * 0.2 * kb.importance AS score
FROM knowledge_base kb LEFT JOIN knowledge_sections s ON s.article_id = kb.id AND s.embedding_model = :model
WHERE kb.embedding_model = :model
GROUP BY kb.id
ORDER BY score DESC, kb.id
LIMIT :limit
""").bindparams(sa.bindparam("now", type_=sa.DateTime(timezone=True)))


def clustered(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    """Unit vectors around random cluster centres, padded to 1536."""
    picks = centres[rng.integers(0, len(centres), count)]
    vectors = picks + 0.35 * rng.standard_normal((count, DIMENSIONS)) / np.sqrt(DIMENSIONS)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.pad(vectors.astype(np.float32), ((0, 0), (0, 1536 - DIMENSIONS)))


class SyntheticVectors:
    """The Gaussian mixture: cards and sections drawn around ``centres``, generated chunk by chunk."""

    def __init__(self, rng: np.random.Generator, centres: np.ndarray) -> None:
        self.rng, self.centres = rng, centres

    def cards(self, start: int, count: int) -> np.ndarray:
        return clustered(self.rng, self.centres, count)

    def sections(self, start: int, count: int, per_article: int) -> np.ndarray:
        return clustered(self.rng, self.centres, count * per_article)

    def queries(self, count: int) -> np.ndarray:
        return clustered(self.rng, self.centres, count)


class RealVectorSource:
    """MiniLM vectors of real short texts (bench/realdata.py), grouped into articles of neighbouring texts."""

    def __init__(self, articles: int, per_article: int, queries: int, seed: int) -> None:
        real = load_real_vectors(articles * (per_article + 1), max(queries, 200), seed=seed)
        self.groups = group_into_articles(real.corpus, per_article + 1, seed=seed)
        self.corpus, self.held_out = real.corpus, real.queries

    @staticmethod
    def _pad(vectors: np.ndarray) -> np.ndarray:
        return np.pad(vectors.astype(np.float32), ((0, 0), (0, 1536 - vectors.shape[1])))

    def cards(self, start: int, count: int) -> np.ndarray:
        return self._pad(self.corpus[self.groups[start:start + count, 0]])

    def sections(self, start: int, count: int, per_article: int) -> np.ndarray:
        return self._pad(self.corpus[self.groups[start:start + count, 1:].reshape(-1)])

    def queries(self, count: int) -> np.ndarray:
        return self._pad(self.held_out[:count])


def draw_boost(rng: np.random.Generator, boosts: str, now: datetime) -> tuple[float, datetime]:
    """An article's importance and creation date under one of the boost distributions."""
    if boosts == "flat":  # every article equally important, ages up to a year
        return 1.0, now - timedelta(days=float(rng.uniform(0, 365)))
    if boosts == "mostly-flat":  # 85 % at importance 1, ages up to three years
        importance = 1.0 if rng.random() < 0.85 else float(rng.uniform(0, 2))
        return importance, now - timedelta(days=float(rng.uniform(0, 3 * 365)))
    return float(rng.uniform(0, 2)), now - timedelta(days=float(rng.uniform(0, 730)))


def load(conn, rng: np.random.Generator, articles: int, per_article: int, source, now: datetime,
         boosts: str = "uniform") -> None:
    """Articles and sections through COPY … FORMAT BINARY, in chunks (bounded memory)."""
    with conn.cursor().copy("COPY knowledge_base (id, title, content, embedding, embedding_model, importance, "
                            "created_at) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "text", "vector", "text", "float8", "timestamptz"])
        for start in range(0, articles, 10_000):
            cards = source.cards(start, min(10_000, articles - start))
            for offset, card in enumerate(cards):
                importance, created = draw_boost(rng, boosts, now)
                copy.write_row((start + offset + 1, f"article {start + offset}", "content", card, MODEL,
                                importance, created))
    columns = ("article_id, ordinal, heading_path, content, char_start, char_end, content_sha256, embedding, "
               "embedding_model")
    with conn.cursor().copy(f"COPY knowledge_sections ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "text[]", "text", "int4", "int4", "text", "vector", "text"])
        for start in range(0, articles, 10_000):
            chunk = min(10_000, articles - start)
            vectors = source.sections(start, chunk, per_article)
            for i in range(chunk):
                for j in range(per_article):
                    copy.write_row((start + i + 1, j, [f"part {j}"], f"section {j}", 0, 1, "x",
                                    vectors[i * per_article + j], MODEL))


def build_clusters(engine: sa.Engine) -> dict:
    """Fit and assign the walk's clusters, then rewrite the tables in cluster order (what
    ``supportrag db cluster --rewrite`` runs); times and sizes. Every strategy then reads compact tables."""
    started = time.perf_counter()
    with Session(engine) as session:
        report = train_clusters(session, MODEL)
        session.commit()
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    rewrite_vector_tables(engine)
    rewrite_s = time.perf_counter() - started
    with engine.connect() as conn:
        size = conn.execute(sa.text(
            "SELECT pg_relation_size('knowledge_sections_cluster_boost')"
            " + pg_relation_size('knowledge_base_cluster_boost') + pg_total_relation_size('vector_clusters')"
        )).scalar_one()
    return {"index_build_s": round(seconds, 1), "rewrite_s": round(rewrite_s, 1), "index_mb": round(size / 2**20, 1),
            "walk_clusters": report.clusters, "median_radius_degrees": report.median_radius_degrees,
            "max_radius_degrees": report.max_radius_degrees}


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


def time_strategy(session: Session, queries: np.ndarray, now: datetime, strategy: str) -> tuple[list, list]:
    """Milliseconds and result ids per query, in steady state: every query runs once untimed first (the rows a
    query reads are then in shared buffers, as a help desk's recurring topics keep them), then once timed."""
    timings, results = [], []
    for index, query in enumerate([*queries, *queries]):
        started = time.perf_counter()
        if strategy == "naive":
            ids = [r[0] for r in session.execute(NAIVE_SQL, {"q": query, "now": now, "model": MODEL,
                                                              "limit": LIMIT})]
        else:
            retrieval = (RetrievalSettings(walk_budget=0) if strategy == "exact"
                         else RetrievalSettings(walk_budget=WALK_BUDGET))
            ids = [r.id for r in rank_articles(session, query, model=MODEL, limit=LIMIT, weights=WEIGHTS,
                                               retrieval=retrieval, now=now)]
        elapsed = (time.perf_counter() - started) * 1000
        session.rollback()
        if index >= len(queries):
            timings.append(elapsed)
            results.append(ids)
    return timings, results


def recall(results: list[list[int]], reference: list[list[int]], k: int) -> float:
    return round(statistics.mean(len(set(r[:k]) & set(e[:k])) / k for r, e in zip(results, reference)), 4)


def summarise(name: str, timings: list[float], results: list, reference: list) -> dict:
    return {"strategy": name, "p50_ms": percentile(timings, 50), "p95_ms": percentile(timings, 95),
            "p99_ms": percentile(timings, 99), "recall_at_3": recall(results, reference, 3),
            "recall_at_10": recall(results, reference, 10)}


def vector_source(args: argparse.Namespace, rng: np.random.Generator):
    """Real text embeddings (``--real``) or the synthetic mixture."""
    if args.real:
        return RealVectorSource(args.articles, args.sections_per_article, args.queries, args.seed)
    centres = rng.standard_normal((args.clusters, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    return SyntheticVectors(rng, centres)


def run(engine: sa.Engine, args: argparse.Namespace, *, loaded: bool) -> dict:
    """Load and index (unless ``loaded``: a kept schema, same arguments), time every strategy; the summary."""
    rng = np.random.default_rng(args.seed)
    source = vector_source(args, rng)
    now = datetime.now(timezone.utc)
    world = {"data": "real" if args.real else "synthetic", "boosts": args.boosts}
    if loaded:
        return _time_all(engine, args, source, now, {**world, "reused_schema": args.keep_schema}, 0.0)
    with engine.begin() as conn:
        started = time.perf_counter()
        load(conn.connection.driver_connection, rng, args.articles, args.sections_per_article, source, now,
             args.boosts)
        load_s = time.perf_counter() - started
    summary = {**world, **build_clusters(engine)}
    with engine.connect() as conn:
        summary["table_mb"] = round(conn.execute(sa.text(
            "SELECT pg_total_relation_size('knowledge_sections') + pg_total_relation_size('knowledge_base')"
        )).scalar_one() / 2**20, 1)
    return _time_all(engine, args, source, now, summary, load_s)


def _time_all(engine: sa.Engine, args: argparse.Namespace, source, now: datetime, summary: dict,
              load_s: float) -> dict:
    """Every strategy over the same queries; recall against the exact scan."""
    queries = source.queries(args.queries)
    with engine.connect() as connection:
        session = Session(bind=connection)
        exact_t, exact_r = time_strategy(session, queries, now, "exact")
        index_t, index_r = time_strategy(session, queries, now, "index")
        naive_t, naive_r = ([], []) if args.skip_naive else time_strategy(session, queries, now, "naive")
        shared_buffers = session.execute(sa.text("SHOW shared_buffers")).scalar_one()
        walks = [walk_candidates(session, q, model=MODEL, limit=LIMIT, weights=WEIGHTS, now=now,
                                 budget=WALK_BUDGET) for q in queries]
        session.rollback()
    fallbacks = sum(walk is None for walk in walks)
    walked = [walk.walked_rows for walk in walks if walk is not None]
    rounds = [walk.rounds for walk in walks if walk is not None]
    rows = [summarise("exact", exact_t, exact_r, exact_r), summarise("index", index_t, index_r, exact_r)]
    if naive_t:
        rows.append(summarise("naive", naive_t, naive_r, exact_r))
    for row in rows:
        print(json.dumps(row))
    by_name = {row["strategy"]: row for row in rows}
    naive_p50 = by_name.get("naive", {}).get("p50_ms")
    return {
        "articles": args.articles, "sections": args.articles * args.sections_per_article, "queries": args.queries,
        "topics": args.clusters,
        "naive_p50_ms": naive_p50, "naive_recall_at_10": by_name.get("naive", {}).get("recall_at_10"),
        "exact_p50_ms": by_name["exact"]["p50_ms"], "exact_p99_ms": by_name["exact"]["p99_ms"],
        "index_p50_ms": by_name["index"]["p50_ms"], "index_p95_ms": by_name["index"]["p95_ms"],
        "index_p99_ms": by_name["index"]["p99_ms"], "index_recall_at_3": by_name["index"]["recall_at_3"],
        "index_recall_at_10": by_name["index"]["recall_at_10"], "index_fallbacks": fallbacks,
        "walk_rows_p50": int(statistics.median(walked)) if walked else None,
        "walk_rows_max": max(walked) if walked else None,
        "walk_rounds_p50": statistics.median(rounds) if rounds else None,
        "speedup_index_vs_naive": round(naive_p50 / by_name["index"]["p50_ms"], 1) if naive_p50 else None,
        "speedup_index_vs_exact": round(by_name["exact"]["p50_ms"] / by_name["index"]["p50_ms"], 1),
        **summary, "load_s": round(load_s, 1), "shared_buffers": shared_buffers,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": now.date().isoformat(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=10_000)
    parser.add_argument("--sections-per-article", type=int, default=5)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--clusters", type=int, default=64,
                        help="topics of the mixture; fewer = more articles within the boost's reach of the top")
    parser.add_argument("--real", action="store_true",
                        help="MiniLM vectors of real short texts (bench/realdata.py) instead of the mixture")
    parser.add_argument("--boosts", choices=("uniform", "flat", "mostly-flat"), default="uniform",
                        help="importance/age: uniform 0-2 and 0-730 days; flat: 1 and 0-365 days; "
                             "mostly-flat: 85%% at 1, 0-3 years")
    parser.add_argument("--skip-naive", action="store_true", help="large corpora: the naive sort takes seconds")
    parser.add_argument("--keep-schema", help="load into this schema and keep it (profiling); reused if loaded")
    args = parser.parse_args()
    base_url = resolve_database_url(Settings.from_env())
    admin = create_engine(base_url, pool_size=1)
    schema = args.keep_schema or f"bench_search_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        loaded = bool(args.keep_schema and conn.execute(
            sa.text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": schema}).first())
    if not loaded:
        with admin.begin() as conn:
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))  # in public, not in the bench schema
            conn.execute(sa.schema.CreateSchema(schema))
    engine = create_engine(base_url, search_path=sql.SQL("{},public").format(sql.Identifier(schema)).as_string(None),
                           pool_size=1)
    try:
        if not loaded:
            upgrade_database(engine)
        result = run(engine, args, loaded=loaded)
    finally:
        engine.dispose()
        if not args.keep_schema:
            with admin.begin() as conn:
                conn.execute(sa.schema.DropSchema(schema, cascade=True, if_exists=True))
        admin.dispose()
    report(RESULTS, result)


if __name__ == "__main__":
    main()
