"""Article versions: who changed an article, through what, and what it said; restore and word-level diff.

Versions are written by triggers on ``knowledge_base`` (migration 0031), so every writer makes one; a writer only
says who it is (``set_change_context``) before it writes. Use cases take a session and never commit.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Article, ArticleVersion

# Where a change came from: the admin pages, the API, the console, a folder import, an approved candidate, an
# applied importance proposal, a restore of an older version, the seed articles, the Python API.
CHANGE_SOURCES = ("page", "api", "cli", "import", "candidate", "proposal", "restore", "seed", "python")


class VersionNotFound(LookupError):
    """No such version of that article."""


class VersionConflict(Exception):
    """The article changed since the editor loaded it: ``current`` is its newest version number."""

    def __init__(self, article_id: int, expected: int, current: int) -> None:
        super().__init__(f"article {article_id} is at version {current}, not {expected}")
        self.article_id, self.expected, self.current = article_id, expected, current


@dataclass(frozen=True)
class ChangeContext:
    """Who makes a change (``admin:<name>``, ``token:<name>``, ``agent:<name>``, ``importer``…) and through what."""

    author: str
    source: str

    def __post_init__(self) -> None:
        if self.source not in CHANGE_SOURCES:
            raise ValueError(f"unknown change source {self.source!r}")


SET_CONTEXT_SQL = sa.text("SELECT set_config('supportrag.author', :author, true), "
                          "set_config('supportrag.source', :source, true)")


def set_change_context(session: Session, change: ChangeContext) -> None:
    """Name the author and source of the versions this transaction writes (transaction-local settings)."""
    session.execute(SET_CONTEXT_SQL, {"author": change.author, "source": change.source})


@dataclass(frozen=True)
class VersionView:
    """One version of an article."""

    article_id: int
    number: int
    title: str
    content: str
    category: str | None
    importance: float
    author: str
    source: str
    created_at: datetime

    def to_dict(self, *, with_content: bool = True) -> dict[str, Any]:
        """JSON-ready form; the list leaves the content out."""
        data = {"article_id": self.article_id, "number": self.number, "title": self.title,
                "category": self.category, "importance": self.importance, "author": self.author,
                "source": self.source, "created_at": self.created_at.isoformat()}
        if with_content:
            data["content"] = self.content
        return data


def _view(row: ArticleVersion) -> VersionView:
    return VersionView(row.article_id, row.number, row.title, row.content, row.category, row.importance,
                       row.author, row.source, row.created_at)


def list_versions(session: Session, article_id: int) -> list[VersionView]:
    """An article's versions, newest first (empty for an unknown article: the caller checks it exists)."""
    rows = session.scalars(sa.select(ArticleVersion).where(ArticleVersion.article_id == article_id)
                           .order_by(ArticleVersion.number.desc()))
    return [_view(row) for row in rows]


def get_version(session: Session, article_id: int, number: int) -> VersionView:
    """One version, or VersionNotFound."""
    row = session.scalar(sa.select(ArticleVersion).where(ArticleVersion.article_id == article_id,
                                                         ArticleVersion.number == number))
    if row is None:
        raise VersionNotFound(f"article {article_id} has no version {number}")
    return _view(row)


def current_version(session: Session, article_id: int) -> int | None:
    """The article's newest version number (None: no such article)."""
    return session.scalar(sa.select(Article.version).where(Article.id == article_id))


def version_fields(version: VersionView) -> dict[str, Any]:
    """The fields a restore writes back."""
    return {"title": version.title, "content": version.content, "category": version.category,
            "importance": version.importance}


_WORD = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[dict[str, str]]:
    """A word-level diff: runs of ``{"op": "same"|"added"|"removed", "text": …}`` (whitespace kept)."""
    before, after = _WORD.findall(old), _WORD.findall(new)
    runs: list[dict[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op == "equal":
            runs.append({"op": "same", "text": "".join(before[i1:i2])})
            continue
        if i2 > i1:
            runs.append({"op": "removed", "text": "".join(before[i1:i2])})
        if j2 > j1:
            runs.append({"op": "added", "text": "".join(after[j1:j2])})
    return runs
