"""The article trash: a deleted article (copied there by a trigger, migration 0031) is restored with its history
until ARTICLE_TRASH_DAYS pass and the worker purges it. Use cases take a session and never commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Article, ArticleTrash, ArticleVersion
from service.knowledge.articles import ArticleNotFound, StoredArticle, update_article
from service.knowledge.versions import ChangeContext, set_change_context
from service.providers.embeddings import Embedder

PURGE_SQL = sa.text("""
WITH gone AS (
    DELETE FROM article_trash WHERE id IN (
        SELECT id FROM article_trash WHERE deleted_at < :cutoff ORDER BY id LIMIT :batch FOR UPDATE SKIP LOCKED)
    RETURNING id),
history AS (DELETE FROM article_versions WHERE article_id IN (SELECT id FROM gone))
SELECT count(*) FROM gone
""")


@dataclass(frozen=True)
class TrashedArticle:
    """An article in the trash."""

    id: int
    title: str
    category: str | None
    version: int
    deleted_at: datetime
    deleted_by: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "title": self.title, "category": self.category, "version": self.version,
                "deleted_at": self.deleted_at.isoformat(), "deleted_by": self.deleted_by}


def list_trash(session: Session, *, limit: int = 200) -> list[TrashedArticle]:
    """Deleted articles, most recently deleted first."""
    rows = session.scalars(sa.select(ArticleTrash).order_by(ArticleTrash.deleted_at.desc(), ArticleTrash.id.desc())
                           .limit(limit))
    return [TrashedArticle(r.id, r.title, r.category, r.version, r.deleted_at, r.deleted_by) for r in rows]


def restore_from_trash(session: Session, embedder: Embedder, article_id: int, *, author: str) -> StoredArticle:
    """Put a trashed article back under its id, as a new version after its last one, and embed it now."""
    trashed = session.get(ArticleTrash, article_id, with_for_update=True)
    if trashed is None:
        raise ArticleNotFound(article_id)
    last = session.scalar(sa.select(sa.func.max(ArticleVersion.number)).where(
        ArticleVersion.article_id == article_id)) or trashed.version
    set_change_context(session, ChangeContext(author, "restore"))
    # A file imported again since the delete owns its path now: the restored article is then a standalone one.
    path_taken = trashed.source_path is not None and session.scalar(
        sa.select(sa.exists().where(Article.source_path == trashed.source_path)))
    session.add(Article(id=trashed.id, title=trashed.title, content=trashed.content, category=trashed.category,
                        importance=trashed.importance, created_at=trashed.created_at, version=last + 1,
                        source_path=None if path_taken else trashed.source_path,
                        source_sha256=None if path_taken else trashed.source_sha256))
    session.delete(trashed)
    session.flush()
    return update_article(session, embedder, article_id, {})  # no field changes: embeds what is missing


def purge_trash(session: Session, days: int, *, now: datetime | None = None, batch: int = 200) -> int:
    """Delete one batch of articles trashed more than ``days`` ago, with their versions; how many articles."""
    moment = now or session.execute(sa.select(sa.func.now())).scalar_one()
    return session.execute(PURGE_SQL, {"cutoff": moment - timedelta(days=days), "batch": batch}).scalar_one()

