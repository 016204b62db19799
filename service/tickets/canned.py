"""Canned replies: saved texts with placeholders, filled in for one ticket. Use cases never commit."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import CannedReply
from service.tickets.validation import BODY_MAX
from service.validation import ValidationError

PLACEHOLDERS = ("customer_email", "ticket_ref")
TITLE_MAX = 100


@dataclass(frozen=True)
class Canned:
    """A saved reply."""

    id: int
    title: str
    body: str


def fill_placeholders(body: str, values: dict[str, str]) -> str:
    """Replace ``{customer_email}`` and ``{ticket_ref}``; other braces stay as typed (no format-string tricks)."""
    for name in PLACEHOLDERS:
        body = body.replace("{" + name + "}", values.get(name, ""))
    return body


def list_canned(session: Session) -> list[Canned]:
    """Every canned reply, by title."""
    return [Canned(c.id, c.title, c.body) for c in session.scalars(sa.select(CannedReply).order_by(CannedReply.title))]


def add_canned(session: Session, title: str, body: str) -> Canned:
    """Save a canned reply; a taken title is a ValidationError."""
    title, body = (title or "").strip(), (body or "").strip()
    errors = {}
    if not 1 <= len(title) <= TITLE_MAX:
        errors["title"] = f"must be 1 to {TITLE_MAX} characters"
    elif session.scalar(sa.select(CannedReply.id).where(CannedReply.title == title)) is not None:
        errors["title"] = "already exists"
    if not 1 <= len(body) <= BODY_MAX or "\x00" in body:
        errors["body"] = f"must be 1 to {BODY_MAX} characters"
    if errors:
        raise ValidationError("invalid canned reply", errors)
    row = CannedReply(title=title, body=body)
    session.add(row)
    session.flush()
    return Canned(row.id, row.title, row.body)


def delete_canned(session: Session, canned_id: int) -> None:
    """Remove a canned reply (nothing happens if it is already gone)."""
    session.execute(sa.delete(CannedReply).where(CannedReply.id == canned_id))
