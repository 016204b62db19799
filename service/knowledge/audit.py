"""The audit log of importance changes: written by the article update, read by the article page and the API."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import IMPORTANCE_CHANGE_REASONS, ImportanceChange


@dataclass(frozen=True)
class ImportanceCause:
    """Why an importance changes and who changed it (``actor``: "admin:<name>", "token:<name>", "cli", …)."""

    reason: str = "api"
    actor: str | None = None
    proposal_id: int | None = None

    def __post_init__(self) -> None:
        if self.reason not in IMPORTANCE_CHANGE_REASONS:
            raise ValueError(f"unknown importance change reason {self.reason!r}")


@dataclass(frozen=True)
class ImportanceChangeView:
    """One line of the audit log."""

    id: int
    article_id: int
    old_importance: float
    new_importance: float
    reason: str
    proposal_id: int | None
    actor: str | None
    created_at: datetime

    @property
    def why(self) -> str:
        """"proposal 7", "manual", "API", "CLI", "import"."""
        if self.reason == "proposal":
            return f"proposal {self.proposal_id}" if self.proposal_id else "proposal (since deleted)"
        return {"api": "API", "cli": "CLI"}.get(self.reason, self.reason)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "article_id": self.article_id, "old_importance": self.old_importance,
                "new_importance": self.new_importance, "reason": self.reason, "proposal_id": self.proposal_id,
                "actor": self.actor, "why": self.why, "created_at": self.created_at.isoformat()}


def record_importance_change(session: Session, article_id: int, old: float, new: float,
                             cause: ImportanceCause) -> None:
    """Add the audit line for a change of importance (nothing when it did not change)."""
    if old == new:
        return
    session.add(ImportanceChange(article_id=article_id, old_importance=old, new_importance=new,
                                 reason=cause.reason, actor=cause.actor, proposal_id=cause.proposal_id,
                                 created_at=sa.func.clock_timestamp()))


def importance_history(session: Session, article_id: int, *, limit: int = 100) -> list[ImportanceChangeView]:
    """An article's importance changes, newest first."""
    rows = session.scalars(sa.select(ImportanceChange).where(ImportanceChange.article_id == article_id)
                           .order_by(ImportanceChange.created_at.desc(), ImportanceChange.id.desc()).limit(limit))
    return [ImportanceChangeView(r.id, r.article_id, r.old_importance, r.new_importance, r.reason, r.proposal_id,
                                 r.actor, r.created_at) for r in rows]
