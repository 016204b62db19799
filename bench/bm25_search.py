"""Lexical and hybrid search latency with the BM25 leg: pruned (MaxScore, service/retrieval/bm25_prune.py) against
the unpruned leg that scores every match, in the same run.

Run by hand:  python bench/bm25_search.py [--articles 20000] [--sections-per-article 5] [--queries 30]
Loads N synthetic articles × S sections into a throwaway schema migrated like the real one, with COPY … FORMAT
BINARY in chunks (the BM25 statistics triggers run once per chunk): text drawn from a Zipf vocabulary (a few very
common words, a long tail of rare ones: the shape of real text), clustered unit vectors as in
bench/section_search.py. Queries are 2–6 words drawn from the same law. Times, per query and warm, the query side
(service/retrieval/bm25.py: terms, caps) included:
- ``lexical_pruned``: the service's lexical-mode statement (with a query vector, as the service runs it);
- ``lexical_unpruned``: the lexical-mode statement before pruning (every match scored; rebuilt below from the same
  fragments); both must return the same top-10 (``lexical_same_top_k`` counts the queries where they do);
- ``hybrid``: the service's default hybrid statement (its fusion, weight and pool from the settings; its lexical
  leg still scores every match);
- ``pool``: the pruned BM25 pool alone (``lexical_top_leg``: the exact BM25 top ``HYBRID_POOL``).
Prints one JSON line (with the load average before the timings); appends it to bench/results/bm25_search.jsonl.

Real text:  python bench/bm25_search.py --real scifact_dev   (or stackfaq_dev, stackfaq_long_dev)
The same statements over one of the shared evaluation sets (../shared/eval: real documents, loaded as
`supportrag eval` loads them, sections and all, embedded by the local MiniLM; vectors cached under artifacts/ by
bench/embedding_cache.py) and its real queries.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from embedding_cache import DiskCachedEmbedder
from pgvector import HalfVector
from search import DIMENSIONS, MODEL, RealVectorSource, clustered, pad
from search import load as load_articles
from section_search import CLUSTERS
from sqlalchemy.orm import Session

from service.config import RetrievalSettings, Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.providers.embeddings import embed_narrow
from service.retrieval import sql as retrieval_sql
from service.retrieval.bm25 import build_bm25_query
from service.retrieval.bm25_prune import lexical_top_leg
from service.retrieval.evaluation import load_eval_set, throwaway_corpus
from service.retrieval.ranking import RankingWeights
from service.retrieval.vector_legs import vector_rank
from service.runtime import Runtime

RESULTS = Path(__file__).resolve().parent / "results" / "bm25_search.jsonl"
VOCABULARY, ZIPF, CHUNK = 50_000, 1.1, 5_000
DEFAULTS = Settings.from_env()
HYBRID = RetrievalSettings(mode="hybrid", fusion=DEFAULTS.fusion_method, vector_weight=DEFAULTS.hybrid_vector_weight,
                           pool=DEFAULTS.hybrid_pool)  # the deployed default


def words(rng: np.random.Generator, count: int) -> str:
    """``count`` words of a Zipf law over the vocabulary (rank r is the word "w<r>")."""
    ranks = rng.zipf(ZIPF, count)
    return " ".join(f"w{rank}" for rank in np.minimum(ranks, VOCABULARY))


def load(conn, rng: np.random.Generator, articles: int, per_article: int, centres: np.ndarray) -> None:
    """Articles and their sections, chunk by chunk (one trigger run per COPY statement)."""
    now = datetime.now(UTC)
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
    conn.execute("ANALYZE search_vectors")


def unpruned_lexical() -> sa.TextClause:
    """The lexical-mode statement before pruning: every matching article's BM25 and half-precision cosine."""
    hybrid = retrieval_sql.build_statement("hybrid", with_vector=True)
    ctes = [retrieval_sql._eligible(precision="half", granularity="section", lexical_only=True),
            *retrieval_sql._vector_ctes("lexical", "convex", "section", "half")]
    final = retrieval_sql._final_select(lexical=True, rank=vector_rank("section", "half"))
    text = "WITH " + ",\n".join(ctes) + ",\n" + final
    return sa.text(text).bindparams(*(bind for name, bind in hybrid._bindparams.items() if f":{name}" in text))


def pool_statement() -> sa.TextClause:
    """The hybrid fusion's lexical pool alone."""
    binds = [sa.bindparam(name, type_=sa.Double) for name in ("bm25_k1", "bm25_b", "bm25_title_weight")]
    return sa.text(f"WITH {lexical_top_leg(':pool')}\nSELECT id FROM lexical_top").bindparams(*binds)


STATEMENTS = {
    "lexical_pruned": lambda: retrieval_sql.build_statement("lexical", with_vector=True),
    "lexical_unpruned": unpruned_lexical,
    "hybrid": lambda: retrieval_sql.build_statement("hybrid", fusion=HYBRID.fusion, with_vector=True),
    "pool": pool_statement,
}


def run_search(session: Session, statement: sa.TextClause, query_vector: np.ndarray, text: str, *,
               model: str = MODEL) -> list[int]:
    """The query side and one statement; the ids it returns."""
    query = build_bm25_query(session, text, [])
    params = {"query_vector": query_vector, "tsquery": query.any_term, "and_tsquery": query.all_terms,
              "lexemes": query.terms, "terms": query.terms, "model": model, "limit": 10,
              "now": datetime.now(UTC), "window_days": 365.0, "similarity_weight": 0.8,
              "recency_weight": 0.2, "vector_weight": HYBRID.vector_weight, "rrf_k": 60.0, "source_prefix": None,
              "candidate_ids": None, "bm25_k1": 1.2, "bm25_b": 0.75, "bm25_title_weight": 3.0,
              **retrieval_sql._margins(query_vector, RankingWeights(), HYBRID)}
    return [row[0] for row in session.execute(statement, params)]


def time_search(session: Session, statement: sa.TextClause, query_vector: np.ndarray, text: str, *,
                model: str = MODEL) -> float:
    """Milliseconds for the query side and one statement."""
    started = time.perf_counter()
    run_search(session, statement, query_vector, text, model=model)
    return (time.perf_counter() - started) * 1000


def percentiles(timings: list[float]) -> tuple[float, float]:
    ordered = sorted(timings)
    return round(statistics.median(ordered), 1), round(ordered[int(0.95 * (len(ordered) - 1))], 1)


def measure(session: Session, vectors: np.ndarray, texts: list[str], result: dict, *, model: str = MODEL) -> None:
    """Every statement's p50 / p95 over the queries (one warm-up each), and whether the lexical ones agree."""
    for name, build in STATEMENTS.items():
        statement = build()
        time_search(session, statement, vectors[0], texts[0], model=model)  # warm-up
        timings = [time_search(session, statement, v, t, model=model) for v, t in zip(vectors, texts)]
        result[f"{name}_p50_ms"], result[f"{name}_p95_ms"] = percentiles(timings)
    pruned, unpruned = STATEMENTS["lexical_pruned"](), unpruned_lexical()
    result["lexical_same_top_k"] = sum(run_search(session, pruned, v, t, model=model)
                                       == run_search(session, unpruned, v, t, model=model)
                                       for v, t in zip(vectors, texts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--sections-per-article", type=int, default=5)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--real", metavar="SET", help="a shared evaluation set's real documents and queries")
    parser.add_argument("--npm", action="store_true", help="real npm package summaries grouped into articles "
                        "(bench/realdata.py, at most 10,000 x 5) and held-out summaries as queries (at most 200)")
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared")
    args = parser.parse_args()
    if args.real:
        return measure_real_text(args.shared / "eval" / args.real)
    rng = np.random.default_rng(42)
    centres = rng.standard_normal((CLUSTERS, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    result: dict = {"articles": args.articles, "sections": args.articles * args.sections_per_article,
                    "queries": args.queries}
    with throwaway_schema(resolve_database_url(Settings.from_env()), "bench_bm25") as engine:
        with engine.begin() as conn:
            started = time.perf_counter()
            if args.npm:
                source = RealVectorSource(args.articles, args.sections_per_article, args.queries, seed=42)
                load_articles(conn.connection.driver_connection, rng, args.articles, args.sections_per_article,
                              source, datetime.now(UTC))
                for table in ("knowledge_base", "knowledge_sections", "search_vectors"):
                    conn.execute(sa.text(f"ANALYZE {table}"))
                vectors, texts = source.queries(args.queries), source.query_texts[:args.queries]
            else:
                load(conn.connection.driver_connection, rng, args.articles, args.sections_per_article, centres)
                vectors = clustered(rng, centres, args.queries)
                texts = [words(rng, int(rng.integers(2, 7))) for _ in range(args.queries)]
            result["load_s"] = round(time.perf_counter() - started, 1)
        result["data"] = "npm" if args.npm else "zipf"
        result["load_average"] = [round(value, 2) for value in os.getloadavg()]
        with engine.connect() as connection:
            measure(Session(bind=connection), vectors, texts, result)
    result.update(machine=f"{platform.machine()}, {platform.processor() or 'cpu'}",
                  date=datetime.now(UTC).date().isoformat())
    report(RESULTS, result)


def measure_real_text(directory: Path) -> None:
    """The statements over a real evaluation set in a throwaway schema, with its real queries."""
    eval_set = load_eval_set(directory / "corpus.jsonl", directory / "queries.jsonl", directory / "qrels.tsv")
    runtime = Runtime.start(Settings.from_env(), seed=False)
    cached = DiskCachedEmbedder(runtime.embedder)
    texts = [query["text"].strip() for query in eval_set.queries]
    result: dict = {"set": directory.name, "articles": len(eval_set.corpus), "queries": len(texts)}
    with throwaway_corpus(Runtime(runtime.settings, runtime.engine, cached), eval_set.corpus) as (loaded, _):
        vectors = embed_narrow(cached, texts)
        cached.save()
        with loaded.session() as session:
            result["units"] = session.execute(sa.text("SELECT units FROM bm25_totals")).scalar_one()
            result["load_average"] = [round(value, 2) for value in os.getloadavg()]
            measure(session, vectors, texts, result, model=cached.model_name)
    result.update(machine=f"{platform.machine()}, {platform.processor() or 'cpu'}",
                  date=datetime.now(UTC).date().isoformat())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
