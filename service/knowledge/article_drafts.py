"""Article drafts: a new article or an edit of one, saved outside knowledge_base so customers, the answer gate and
search never see it, and published later through the usual add or update (a version). Never commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Article, ArticleDraft
from service.knowledge.articles import ArticleNotFound, StoredArticle, add_article, update_article
from service.knowledge.versions import ChangeContext
from service.providers.embeddings import Embedder
from service.validation import clean_article_fields


class DraftNotFound(LookupError):
    """No draft with that id."""


@dataclass(frozen=True)
class DraftView:
    """A draft as stored."""

    id: int
    article_id: int | None
    base_version: int | None
    title: str
    content: str
    category: str | None
    importance: float
    author: str
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "article_id": self.article_id, "base_version": self.base_version,
                "title": self.title, "content": self.content, "category": self.category,
                "importance": self.importance, "author": self.author, "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat()}


def _view(d: ArticleDraft) -> DraftView:
    return DraftView(d.id, d.article_id, d.base_version, d.title, d.content, d.category, d.importance, d.author,
                     d.created_at, d.updated_at)


def _draft(session: Session, draft_id: int, *, lock: bool = False) -> ArticleDraft:
    draft = session.get(ArticleDraft, draft_id, with_for_update=lock) if 1 <= draft_id < 2**63 else None
    if draft is None:
        raise DraftNotFound(draft_id)
    return draft


def create_draft(session: Session, fields: dict[str, Any], *, author: str,
                 article_id: int | None = None) -> DraftView:
    """A draft of a new article, or (``article_id``) an edit of one starting from its current text."""
    if article_id is None:
        cleaned = clean_article_fields(fields)
        draft = ArticleDraft(author=author, **cleaned)
    else:
        article = session.get(Article, article_id) if 1 <= article_id < 2**63 else None
        if article is None:
            raise ArticleNotFound(article_id)
        current = {"title": article.title, "content": article.content, "category": article.category,
                   "importance": article.importance}
        draft = ArticleDraft(author=author, article_id=article_id, base_version=article.version,
                             **{**current, **clean_article_fields(fields, partial=True)})
    session.add(draft)
    session.flush()
    session.refresh(draft)
    return _view(draft)


def update_draft(session: Session, draft_id: int, fields: dict[str, Any], *, author: str) -> DraftView:
    """Change a draft's fields (validated as an article's)."""
    draft = _draft(session, draft_id, lock=True)
    for name, value in clean_article_fields(fields, partial=True).items():
        setattr(draft, name, value)
    draft.author, draft.updated_at = author, sa.func.clock_timestamp()
    session.flush()
    session.refresh(draft)
    return _view(draft)


def get_draft(session: Session, draft_id: int) -> DraftView:
    """One draft, or DraftNotFound."""
    return _view(_draft(session, draft_id))


def list_drafts(session: Session, *, limit: int = 200) -> list[DraftView]:
    """Drafts, most recently changed first."""
    rows = session.scalars(sa.select(ArticleDraft).order_by(ArticleDraft.updated_at.desc(), ArticleDraft.id.desc())
                           .limit(limit))
    return [_view(row) for row in rows]


def delete_draft(session: Session, draft_id: int) -> None:
    """Throw a draft away."""
    session.delete(_draft(session, draft_id, lock=True))
    session.flush()


def publish_draft(session: Session, embedder: Embedder, draft_id: int, *, change: ChangeContext) -> StoredArticle:
    """Make the draft the article (new, or a new version of the one it edits; VersionConflict if that article
    changed since the draft began); the draft is then gone."""
    draft = _draft(session, draft_id, lock=True)
    fields = {"title": draft.title, "content": draft.content, "category": draft.category,
              "importance": draft.importance}
    if draft.article_id is None:
        stored = add_article(session, embedder, fields, change=change)
    else:
        stored = update_article(session, embedder, draft.article_id, fields, change=change,
                                expected_version=draft.base_version)
    session.delete(draft)
    session.flush()
    return stored
