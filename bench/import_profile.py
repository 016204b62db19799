"""Where an import's time goes (bench/import_articles.py --profile): the embedder, then the writes, BM25 on and off.

- embedder: every article's texts through ``indexing.embed_batch`` in import-sized batches, torch reference and
  ONNX (the product's), no database;
- writes: the same articles stored with their vectors already known (``insert`` + ``write_batch``: COPY of the
  sections, their generated columns, the BM25 and ``search_vectors`` triggers, the cards' UPDATE), in a throwaway
  schema, three times: the schema as migrated; without the BM25 statement triggers; and without them and the BM25
  generated columns (``search_vector``/``bm25_length``, each a ``to_tsvector`` per row). Measured only: the BM25
  schema is the retrieval work's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import resolve_database_url
from service.db.migrate import throwaway_schema
from service.db.models import Article
from service.knowledge.importer import IMPORT_BATCH_SIZE
from service.knowledge.indexing import EmbeddedBatch, IndexInput, embed_batch, write_batch
from service.providers.embeddings import LocalEmbedder

BM25_TRIGGERS = [f"{table}_bm25_{event}" for table in ("knowledge_base", "knowledge_sections")
                 for event in ("insert", "update", "delete", "truncate")]


def _batches(path: Path) -> list[list[dict]]:
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [{"title": item["title"], "content": item["content"], "importance": 1.0} for item in items]
    return [items[i:i + IMPORT_BATCH_SIZE] for i in range(0, len(items), IMPORT_BATCH_SIZE)]


def _embed_all(embedder, batches: list[list[dict]]) -> tuple[float, list[EmbeddedBatch]]:
    started = time.perf_counter()
    done = [embed_batch(embedder, [IndexInput(0, a["title"], a["content"]) for a in batch]) for batch in batches]
    return time.perf_counter() - started, done


def _write_all(engine: sa.Engine, batches: list[list[dict]], embedded: list[EmbeddedBatch]) -> float:
    with engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE knowledge_base CASCADE"))
    with Session(engine) as session:
        started = time.perf_counter()
        for batch, ready in zip(batches, embedded):
            ids = list(session.scalars(sa.insert(Article).returning(Article.id, sort_by_parameter_order=True), batch))
            write_batch(session, ready, ids)
        session.commit()
        return time.perf_counter() - started


def profile(articles: Path) -> dict:
    """Seconds for each part, on the articles of ``articles``."""
    batches = _batches(articles)
    result: dict = {}
    from service.providers.torch_reference import TorchReferenceEmbedder  # the old path's model

    reference = TorchReferenceEmbedder()
    reference.embed(["warm up"])
    result["embed_torch_s"] = round(_embed_all(reference, batches)[0], 1)
    print(result, flush=True)
    del reference
    onnx = LocalEmbedder()
    onnx.embed(["warm up"])
    seconds, embedded = _embed_all(onnx, batches)
    result["embed_onnx_s"] = round(seconds, 1)
    with throwaway_schema(resolve_database_url(Settings.from_env()), "bench_import") as engine:
        result["write_s"] = round(_write_all(engine, batches, embedded), 1)
        print(result, flush=True)
        with engine.begin() as conn:
            for name in BM25_TRIGGERS:
                table = name.rsplit("_bm25_", 1)[0]
                conn.execute(sa.text(f"ALTER TABLE {table} DISABLE TRIGGER {name}"))
        result["write_no_bm25_triggers_s"] = round(_write_all(engine, batches, embedded), 1)
        with engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE knowledge_sections DROP COLUMN bm25_length, DROP COLUMN search_vector"))
            conn.execute(sa.text("ALTER TABLE knowledge_base DROP COLUMN bm25_length CASCADE"))
        result["write_no_bm25_s"] = round(_write_all(engine, batches, embedded), 1)
    return result
