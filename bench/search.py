"""Search latency and recall: the naive statement vs the full-precision scan vs the service's default search.

Run by hand:  python bench/search.py --articles 8000 --sections-per-article 5 --queries 20 --real
Loads either real embeddings (``--real``: MiniLM vectors of real short texts, bench/realdata.py, neighbours
grouped into articles) or clustered synthetic unit vectors (a Gaussian mixture in MiniLM's 384 dimensions), with
one of three boost distributions, through COPY … FORMAT BINARY into a throwaway schema migrated like the real
one, stored as the service stores them (a card padded to 1536 plus its half-precision copy; sections at the
model's width). Then per query (warm cache: each query once untimed, then once timed; limit 10):
- naive: one ``ORDER BY`` of the formula over every article joined to all of its sections;
- full: the exact scan in full precision at the model's width (service/retrieval/sql.py, ``precision="full"``);
- default: the service's search: the half-precision scan and its full-precision re-score;
- approximate (``--approximate``): the opt-in HNSW mode (service/retrieval/approximate.py);
recall@3 / @10 against the full scan (the reference), p50/p95/p99, the row sizes and the load rate. Prints one
JSON line per strategy and a last summary line; appends the summary to bench/results/search.jsonl.
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
from pgvector import HalfVector
from psycopg import sql
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import TITLE_MAX
from service.db.engine import create_engine, resolve_database_url
from service.db.migrate import upgrade_database
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles
from service.retrieval.approximate import build_approximate_index

RESULTS = Path(__file__).resolve().parent / "results" / "search.jsonl"
MODEL, DIMENSIONS, LIMIT = "bench-model", 384, 10
WEIGHTS = RankingWeights()

# The naive statement: what a first version writes. Every article, every section, then sort.
NAIVE_SQL = sa.text("""
SELECT kb.id,
       GREATEST(1.0 - (kb.embedding <=> CAST(:padded AS vector)),
                max(1.0 - (s.embedding <=> CAST(:q AS vector)))) * 0.8
       + LEAST(1.0, GREATEST(0.0, 1.0 - EXTRACT(EPOCH FROM (:now - kb.created_at)) / 86400.0 / 365.0))
         * 0.2 * kb.importance AS score
FROM knowledge_base kb LEFT JOIN knowledge_sections s ON s.article_id = kb.id AND s.embedding_model = :model
WHERE kb.embedding_model = :model
GROUP BY kb.id
ORDER BY score DESC, kb.id
LIMIT :limit
""").bindparams(sa.bindparam("now", type_=sa.DateTime(timezone=True)))


def pad(vector: np.ndarray) -> np.ndarray:
    """A card as knowledge_base.embedding stores it: zero-padded to 1536."""
    return np.pad(vector, (0, 1536 - len(vector)))


def clustered(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    """Unit vectors around random cluster centres (the model's width)."""
    picks = centres[rng.integers(0, len(centres), count)]
    vectors = picks + 0.35 * rng.standard_normal((count, DIMENSIONS)) / np.sqrt(DIMENSIONS)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


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

    def section_text(self, article: int, ordinal: int) -> str:
        return f"section {ordinal}"

    def card_text(self, article: int) -> tuple[str, str]:
        return f"article {article}", "content"


# bench/realdata.py's defaults: one pool, embedded once; a corpus is its first N vectors (--seed is the boosts')
REAL_POOL, REAL_QUERIES, REAL_SEED = 60_000, 200, 7


class RealVectorSource:
    """MiniLM vectors of real short texts (bench/realdata.py), grouped into articles of neighbouring texts."""

    def __init__(self, articles: int, per_article: int, queries: int, seed: int) -> None:
        needed = articles * (per_article + 1)
        if needed > REAL_POOL or queries > REAL_QUERIES:
            raise SystemExit(f"the real pool holds {REAL_POOL} vectors and {REAL_QUERIES} queries")
        real = load_real_vectors(REAL_POOL, REAL_QUERIES, seed=REAL_SEED)  # embedded once, cached
        self.groups = group_into_articles(real.corpus[:needed], per_article + 1, seed=REAL_SEED)
        self.corpus, self.held_out = real.corpus, real.queries
        self.texts, self.query_texts = real.corpus_texts, real.query_texts

    def cards(self, start: int, count: int) -> np.ndarray:
        return self.corpus[self.groups[start:start + count, 0]]

    def sections(self, start: int, count: int, per_article: int) -> np.ndarray:
        return self.corpus[self.groups[start:start + count, 1:].reshape(-1)]

    def queries(self, count: int) -> np.ndarray:
        return self.held_out[:count]

    def section_text(self, article: int, ordinal: int) -> str:
        """The real text the section's vector embeds."""
        return self.texts[self.groups[article, ordinal + 1]]

    def card_text(self, article: int) -> tuple[str, str]:
        """Title and content: the text the card's vector embeds, and every text of the article (so a section's
        words are in its card, as the service stores articles: the BM25 leg finds candidates by the card)."""
        row = self.groups[article]
        return self.texts[row[0]][:TITLE_MAX], "\n\n".join(self.texts[i] for i in row)


def draw_boost(rng: np.random.Generator, boosts: str, now: datetime) -> tuple[float, datetime]:
    """An article's importance and creation date under one of the boost distributions."""
    if boosts == "flat":  # every article equally important, ages up to a year
        return 1.0, now - timedelta(days=float(rng.uniform(0, 365)))
    if boosts == "mostly-flat":  # 85 % at importance 1, ages up to three years
        importance = 1.0 if rng.random() < 0.85 else float(rng.uniform(0, 2))
        return importance, now - timedelta(days=float(rng.uniform(0, 3 * 365)))
    return float(rng.uniform(0, 2)), now - timedelta(days=float(rng.uniform(0, 730)))


def load(conn, rng: np.random.Generator, articles: int, per_article: int, source, now: datetime,
         boosts: str = "uniform", model: str = MODEL) -> None:
    """Articles and sections through COPY … FORMAT BINARY, in chunks (bounded memory)."""
    with conn.cursor().copy("COPY knowledge_base (id, title, content, embedding, embedding_half, embedding_model, "
                            "importance, created_at) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "text", "vector", "halfvec", "text", "float8", "timestamptz"])
        for start in range(0, articles, 10_000):
            cards = source.cards(start, min(10_000, articles - start))
            for offset, card in enumerate(cards):
                importance, created = draw_boost(rng, boosts, now)
                title, content = source.card_text(start + offset)
                copy.write_row((start + offset + 1, title, content, pad(card),
                                HalfVector(card / np.linalg.norm(card)), model, importance, created))
    columns = ("article_id, ordinal, heading_path, content, char_start, char_end, content_sha256, embedding, "
               "embedding_model")
    with conn.cursor().copy(f"COPY knowledge_sections ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int4", "text[]", "text", "int4", "int4", "text", "vector", "text"])
        for start in range(0, articles, 10_000):
            chunk = min(10_000, articles - start)
            vectors = source.sections(start, chunk, per_article)
            for i in range(chunk):
                for j in range(per_article):
                    copy.write_row((start + i + 1, j, [f"part {j}"], source.section_text(start + i, j), 0, 1, "x",
                                    vectors[i * per_article + j], model))


def measure_tables(engine: sa.Engine) -> dict:
    """Table sizes, the average section row (its heap tuple, and all it stores: TOAST and indexes included) and
    what the exact scan reads (search_vectors' heap)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in ("knowledge_sections", "knowledge_base", "search_vectors"):
            conn.execute(sa.text(f"VACUUM ANALYZE {table}"))
    with engine.connect() as conn:
        row = conn.execute(sa.text("""
            SELECT pg_total_relation_size('knowledge_sections') + pg_total_relation_size('knowledge_base')
                   + pg_total_relation_size('search_vectors') AS total,
                   pg_relation_size('search_vectors') AS scan_heap,
                   (SELECT count(*) FROM search_vectors) AS vectors,
                   pg_relation_size('knowledge_sections') AS section_heap,
                   pg_total_relation_size('knowledge_sections') AS section_total,
                   (SELECT count(*) FROM knowledge_sections) AS sections,
                   (SELECT avg(pg_column_size(s.*)) FROM knowledge_sections s) AS tuple_bytes
        """)).one()
    return {"table_mb": round(row.total / 2**20, 1), "section_tuple_bytes": round(float(row.tuple_bytes)),
            "section_heap_bytes_per_row": round(row.section_heap / row.sections),
            "section_bytes_per_row": round(row.section_total / row.sections),
            "scanned_mb": round(row.scan_heap / 2**20, 1), "scanned_bytes_per_vector": round(row.scan_heap / row.vectors)}


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


STRATEGIES = ("full", "default", "approximate", "naive")
CANDIDATES = [RetrievalSettings().approximate_candidates]  # --candidates


def search_ids(session: Session, query: np.ndarray, now: datetime, strategy: str) -> list[int]:
    """One search's top-10 ids by ``strategy``."""
    if strategy == "naive":
        return [r[0] for r in session.execute(NAIVE_SQL, {"q": query, "padded": pad(query), "now": now,
                                                          "model": MODEL, "limit": LIMIT})]
    retrieval = RetrievalSettings(approximate=strategy == "approximate", approximate_candidates=CANDIDATES[0],
                                  ef_search=min(1000, max(100, CANDIDATES[0])))
    return [r.id for r in rank_articles(session, query, model=MODEL, limit=LIMIT, weights=WEIGHTS,
                                        retrieval=retrieval, now=now,
                                        precision="full" if strategy == "full" else None)]


def time_strategy(session: Session, queries: np.ndarray, now: datetime, strategy: str) -> tuple[list, list]:
    """Milliseconds and result ids per query, in steady state: every query runs once untimed first (the rows a
    query reads are then in shared buffers, as a help desk's recurring topics keep them), then once timed."""
    timings, results = [], []
    for index, query in enumerate([*queries, *queries]):
        started = time.perf_counter()
        ids = search_ids(session, query, now, strategy)
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
    """Load (unless ``loaded``: a kept schema, same arguments), time every strategy; the summary."""
    rng = np.random.default_rng(args.seed)
    source = vector_source(args, rng)
    now = datetime.now(timezone.utc)
    summary = {"data": "real" if args.real else "synthetic", "boosts": args.boosts}
    if not loaded:
        with engine.begin() as conn:
            started = time.perf_counter()
            load(conn.connection.driver_connection, rng, args.articles, args.sections_per_article, source, now,
                 args.boosts)
            summary["load_s"] = round(time.perf_counter() - started, 1)
    summary.update(measure_tables(engine))
    if args.approximate:
        started = time.perf_counter()
        with Session(engine) as session:
            build_approximate_index(session, MODEL)
            session.commit()
        summary["hnsw_build_s"] = round(time.perf_counter() - started, 1)
    return _time_all(engine, args, source, now, summary)


def _time_all(engine: sa.Engine, args: argparse.Namespace, source, now: datetime, summary: dict) -> dict:
    """Every strategy over the same queries; recall against the full-precision scan."""
    queries = source.queries(args.queries)
    strategies = [s for s in STRATEGIES if (s != "naive" or not args.skip_naive)
                  and (s != "approximate" or args.approximate)]
    timed = {}
    with engine.connect() as connection:
        session = Session(bind=connection)
        if args.parallel_workers is not None:  # committed: each search's rollback must not undo it
            session.execute(sa.text("SELECT set_config('max_parallel_workers_per_gather', :n, false)"),
                            {"n": str(args.parallel_workers)})
            if args.force_parallel:  # the planner's default costs keep a 48,000-vector scan serial
                session.execute(sa.text("SELECT set_config('parallel_setup_cost', '0', false), "
                                        "set_config('parallel_tuple_cost', '0', false)"))
            session.commit()
        for strategy in strategies:
            timed[strategy] = time_strategy(session, queries, now, strategy)
        settings = dict(session.execute(sa.text(
            "SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers', 'max_parallel_workers_per_gather',"
            " 'max_parallel_workers', 'min_parallel_table_scan_size', 'parallel_setup_cost')")).all())
    reference = timed["full"][1]
    rows = [summarise(name, *timed[name], reference) for name in strategies]
    for row in rows:
        print(json.dumps(row))
    by_name = {row["strategy"]: row for row in rows}
    result = {"articles": args.articles, "sections": args.articles * args.sections_per_article,
              "queries": args.queries, "topics": None if args.real else args.clusters}
    for row in rows:
        name = row["strategy"]
        result.update({f"{name}_p50_ms": row["p50_ms"], f"{name}_p99_ms": row["p99_ms"],
                       f"{name}_recall_at_10": row["recall_at_10"]})
    if "naive" in by_name:
        result["speedup_default_vs_naive"] = round(by_name["naive"]["p50_ms"] / by_name["default"]["p50_ms"], 1)
    result["speedup_default_vs_full"] = round(by_name["full"]["p50_ms"] / by_name["default"]["p50_ms"], 1)
    return {**result, **summary, "pg_settings": settings,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": now.date().isoformat()}


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
    parser.add_argument("--approximate", action="store_true",
                        help="also build the HNSW indexes and time the approximate mode")
    parser.add_argument("--parallel-workers", type=int,
                        help="max_parallel_workers_per_gather for the searches (default: the server's)")
    parser.add_argument("--force-parallel", action="store_true",
                        help="with --parallel-workers: parallel_setup_cost and parallel_tuple_cost 0")
    parser.add_argument("--candidates", type=int, default=CANDIDATES[0],
                        help="approximate mode: nearest sections (and cards) whose articles are ranked")
    parser.add_argument("--skip-naive", action="store_true", help="large corpora: the naive sort takes seconds")
    parser.add_argument("--keep-schema", help="load into this schema and keep it (profiling); reused if loaded")
    args = parser.parse_args()
    CANDIDATES[0] = args.candidates
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
