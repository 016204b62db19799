"""Ingest throughput: section rows/s for row INSERT vs executemany vs COPY … FORMAT BINARY, and articles/s end to end.

Run by hand:  python bench/ingest.py --rows 5000 --articles 200
Into a throwaway schema migrated like the real one, with precomputed vectors at MiniLM's 384 dimensions (the
database's triggers add each one's half-precision copy to ``search_vectors``):
- ``insert``: one INSERT per row (what a loop over the ORM does);
- ``executemany``: the ORM's batched INSERT (what index_articles did before COPY);
- ``copy``: service.knowledge.indexing.copy_sections (binary COPY), what import, seed and the bulk API use now;
then the stored size of a section row (its heap tuple; with its TOASTed parts and indexes; and its narrow copy in
``search_vectors``, which the exact scan reads), and ``--articles`` synthetic articles through ``bulk_add_articles``
with the local MiniLM embedder (articles/s end to end).
Prints one JSON line; appends it to bench/results/ingest.jsonl.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import sqlalchemy as sa
from benchlib import report
from realdata import DEFAULT_SOURCE, read_texts
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.db.models import ArticleSection
from service.knowledge.articles import bulk_add_articles
from service.knowledge.indexing import copy_sections
from service.providers.embeddings import LocalEmbedder

RESULTS = Path(__file__).resolve().parent / "results" / "ingest.jsonl"
INSERT_SQL = sa.text("""
INSERT INTO knowledge_sections (article_id, ordinal, heading_path, content, char_start, char_end, kind,
                                content_sha256, embedding, embedding_model)
VALUES (:article_id, :ordinal, :heading_path, :content, :char_start, :char_end, :kind, :content_sha256,
        :embedding, :embedding_model)
""").bindparams(sa.bindparam("embedding", type_=ArticleSection.embedding.type))
WORDS = ("account password refund order shipping invoice billing login reset email delivery return warranty "
         "subscription cancel upgrade plan payment card address tracking support agent help").split()


SYNTHETIC_CONTENT = ["text " * 60]  # one word: its tsvector is one lexeme


def real_contents(count: int) -> list[str]:
    """Sections of real text: four npm package summaries each (bench/realdata.py's source), ~300 characters."""
    texts = read_texts(DEFAULT_SOURCE)
    return [" ".join(texts[4 * i:4 * i + 4]) for i in range(count)]


def section_rows(rng: np.random.Generator, article_id: int, count: int, start: int,
                 contents: list[str] = SYNTHETIC_CONTENT) -> list[dict]:
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [{"article_id": article_id, "ordinal": start + i, "heading_path": ["Part"],
             "content": contents[(start + i) % len(contents)],
             "char_start": 0, "char_end": 300, "kind": "text", "content_sha256": f"{start + i}",
             "embedding": vectors[i], "embedding_model": "bench-model"} for i in range(count)]


def rows_per_second(session: Session, rng: np.random.Generator, method: str, rows: int,
                    contents: list[str] = SYNTHETIC_CONTENT) -> float:
    """Write ``rows`` sections with ``method`` inside one transaction (rolled back); rows/s."""
    article_id = session.execute(sa.text(
        "INSERT INTO knowledge_base (title, content) VALUES ('bench', 'bench') RETURNING id")).scalar_one()
    data = section_rows(rng, article_id, rows, 0, contents)
    started = time.perf_counter()
    if method == "insert":
        for row in data:
            session.execute(INSERT_SQL, row)
    elif method == "executemany":
        session.execute(sa.insert(ArticleSection), data)
    else:
        copy_sections(session, data)
    session.flush()
    seconds = time.perf_counter() - started
    session.rollback()
    return round(rows / seconds)


def section_row_size(engine: sa.Engine, rng: np.random.Generator, rows: int) -> dict:
    """Bytes per stored section row: the heap tuple, and the table with its TOAST and indexes."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("TRUNCATE knowledge_base CASCADE"))  # the rolled-back rows above still fill pages
    with Session(engine) as session:
        article_id = session.execute(sa.text(
            "INSERT INTO knowledge_base (title, content) VALUES ('size', 'size') RETURNING id")).scalar_one()
        copy_sections(session, section_rows(rng, article_id, rows, 0))
        session.commit()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM knowledge_sections"))
        tuple_bytes = conn.execute(sa.text("SELECT avg(pg_column_size(s.*)) FROM knowledge_sections s")).scalar_one()
        conn.execute(sa.text("VACUUM search_vectors"))
        heap, total, scanned = conn.execute(sa.text(
            "SELECT pg_relation_size('knowledge_sections'), pg_total_relation_size('knowledge_sections'), "
            "pg_total_relation_size('search_vectors')")).one()
        conn.execute(sa.text("TRUNCATE knowledge_base CASCADE"))
    return {"section_tuple_bytes": round(float(tuple_bytes)), "section_heap_bytes_per_row": round(heap / rows),
            "section_total_bytes_per_row": round(total / rows),
            "scanned_copy_bytes_per_row": round(scanned / rows)}  # search_vectors (migration 0016), indexes too


def synthetic_articles(rng: np.random.Generator, count: int) -> list[dict]:
    """Markdown articles of three sections of ~80 words each."""
    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS, n))
    return [{"title": f"How to {words(3)} {i}", "content": "\n\n".join(f"## {words(2)}\n\n{words(80)}" for _ in range(3)),
             "importance": 1.0} for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--articles", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs per method; the best counts")
    parser.add_argument("--real-text", action="store_true",
                        help="sections of real text (npm summaries) instead of one repeated word")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    base_url = resolve_database_url(Settings.from_env())
    contents = real_contents(args.rows) if args.real_text else SYNTHETIC_CONTENT
    result: dict = {"rows": args.rows, "text": "real" if args.real_text else "synthetic"}
    with throwaway_schema(base_url, "bench_ingest") as engine:
        with Session(engine) as session:
            for method in ("insert", "executemany", "copy"):  # the best of --repeat: a shared machine's noise
                result[f"{method}_rows_per_s"] = max(rows_per_second(session, rng, method, args.rows, contents)
                                                     for _ in range(args.repeat))
        result["copy_vs_insert"] = round(result["copy_rows_per_s"] / result["insert_rows_per_s"], 1)
        result.update(section_row_size(engine, rng, args.rows))
        embedder = LocalEmbedder()
        articles = synthetic_articles(rng, args.articles)
        embedder.embed(["warm up"])
        with Session(engine) as session:
            started = time.perf_counter()
            bulk_add_articles(session, embedder, articles)
            session.commit()
            seconds = time.perf_counter() - started
            sections = session.execute(sa.text("SELECT count(*) FROM knowledge_sections")).scalar_one()
        result.update({"articles": args.articles, "sections_written": sections,
                       "end_to_end_articles_per_s": round(args.articles / seconds, 1)})
    result.update({"machine": f"{platform.machine()}, {os.cpu_count()} cores",
                   "date": datetime.now(timezone.utc).date().isoformat()})
    report(RESULTS, result)


if __name__ == "__main__":
    main()
