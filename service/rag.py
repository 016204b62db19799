"""The seed project's retrieval facade, on top of the knowledge base.

    from service.rag import RAG, format_advisory_context

    rag = RAG(knowledge_dir="knowledge")          # relative to the current directory, or absolute
    rag.corpus                                    # [{"source": "billing/refunds.md", "content": "..."}, ...]
    items = rag.retrieve("How do I get my money back?", limit=3)   # contents of the best articles
    prompt_part = format_advisory_context(items)

``RAG(...)`` imports the folder's markdown files with ``service.knowledge.importer.import_path`` (unchanged files
are skipped, so constructing it again is cheap) and prunes articles whose file was deleted, so the
folder's articles in the database are exactly its files. A missing or empty folder gives an empty corpus
and no error. ``retrieve`` searches only articles imported from that folder (not the rest of the
knowledge base) and drops results whose cosine similarity is below the answerability floor
(``ANSWER_MIN_SIMILARITY``, 0.30 by default) — the same floor that decides whether a ticket is answered —
so an unrelated question gives ``[]``. It works on the configured database (``DATABASE_URL`` or the
embedded server, no setup call) unless a ``runtime`` is given.

``python -m service.rag [--dir D] [QUERY]`` loads a folder and prints "Retrieved N items" with previews.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from service.db.models import Article
from service.knowledge.importer import ImportReport, folder_prefix, import_path, prune_folder
from service.retrieval.search import search_knowledge
from service.runtime import Runtime, default_runtime

log = logging.getLogger(__name__)

ADVISORY_HEADER = "Additional Advisory Context (RAG):\n"
ADVISORY_SEPARATOR = "\n---\n"
PREVIEW_CHARS = 200


def format_advisory_context(items: list[str]) -> str:
    """Retrieved contents as a prompt section in the seed format; "" when there are none."""
    if not items:
        return ""
    return ADVISORY_HEADER + ADVISORY_SEPARATOR.join(items)


class RAG:
    """Retrieval over the markdown files of one folder, stored and searched in the knowledge base."""

    def __init__(self, knowledge_dir: str | os.PathLike[str] = "knowledge", *,
                 runtime: Runtime | None = None) -> None:
        self.runtime = runtime or default_runtime()
        self.knowledge_dir = Path(knowledge_dir).resolve()  # relative to the current directory, now
        self.source_prefix = folder_prefix(self.knowledge_dir)
        self.corpus: list[dict[str, str]] = []
        self.report = ImportReport()
        self.reload()

    def reload(self) -> ImportReport:
        """Import the folder again (new and changed files; deleted ones are removed) and refresh ``corpus``."""
        if self.knowledge_dir.exists() and not self.knowledge_dir.is_dir():
            raise NotADirectoryError(f"knowledge_dir is not a folder: {self.knowledge_dir}")
        with self.runtime.session() as session:
            if self.knowledge_dir.is_dir():
                self.report = import_path(session, self.runtime.embedder, self.knowledge_dir, prune=True)
            else:
                self.report = ImportReport(pruned=prune_folder(session, self.knowledge_dir))
            rows = session.execute(
                sa.select(Article.source_path, Article.content)
                .where(sa.func.starts_with(Article.source_path, self.source_prefix))
                .order_by(Article.source_path)
            ).all()
        for failure in self.report.failed:
            log.warning("not loaded: %s: %s", failure.source, failure.reason)
        self.corpus = [
            {"source": Path(path).relative_to(self.knowledge_dir).as_posix(), "content": content}
            for path, content in rows
        ]
        return self.report

    def retrieve(self, query: str, limit: int = 3) -> list[str]:
        """Contents of the best ``limit`` articles from this folder that pass the similarity floor."""
        if not self.corpus:
            return []
        floor = self.runtime.settings.answer_min_similarity
        with self.runtime.session() as session:
            results = search_knowledge(session, self.runtime.embedder, query, limit=limit,
                                       weights=self.runtime.weights, source_prefix=self.source_prefix)
            # A lexical-only hit has no cosine similarity, so it cannot pass the floor.
            ids = [r.id for r in results if r.similarity is not None and r.similarity >= floor]
            contents = dict(session.execute(
                sa.select(Article.id, Article.content)
                .where(Article.id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.BigInteger))))
            ).all()) if ids else {}
        return [contents[article_id] for article_id in ids if article_id in contents]


def main(argv: list[str] | None = None) -> int:
    """Standalone check: load a folder, retrieve for a query, print what came back."""
    parser = argparse.ArgumentParser(prog="python -m service.rag", description=main.__doc__)
    parser.add_argument("--dir", default="knowledge", help="knowledge folder (default: ./knowledge)")
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("query", nargs="?", default="How do I reset my password?")
    args = parser.parse_args(argv)
    rag = RAG(knowledge_dir=args.dir)
    print(f"Loaded {len(rag.corpus)} articles from {rag.knowledge_dir} ({rag.report.summary()})")
    items = rag.retrieve(args.query, limit=args.limit)
    print(f"Retrieved {len(items)} items for: {args.query}")
    for number, item in enumerate(items, start=1):
        preview = " ".join(item.split())
        print(f"{number}. {preview[:PREVIEW_CHARS]}{'…' if len(preview) > PREVIEW_CHARS else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
