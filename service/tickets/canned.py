"""Canned replies: saved texts with placeholders, filled in for one ticket. Use cases never commit."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AdminUser, CannedReply, Ticket
from service.tickets.validation import BODY_MAX
from service.validation import ValidationError

PLACEHOLDERS = ("customer_name", "customer_email", "agent_name", "ticket_ref")
CUSTOMER_NAME_FALLBACK = "there"  # "Hello {customer_name}," → "Hello there," when no name is known
AGENT_NAME_FALLBACK = "Support"  # customers never see an agent's login name
TITLE_MAX = 100


@dataclass(frozen=True)
class Canned:
    """A saved reply."""

    id: int
    title: str
    body: str


@dataclass(frozen=True)
class FilledCanned:
    """A canned reply with its placeholders filled in for one ticket and agent."""

    id: int
    title: str
    body: str


def fill_placeholders(body: str, values: dict[str, str]) -> str:
    """Replace ``{customer_name}``, ``{customer_email}``, ``{agent_name}`` and ``{ticket_ref}``; other braces stay
    as typed (no format-string tricks)."""
    for name in PLACEHOLDERS:
        body = body.replace("{" + name + "}", values.get(name, ""))
    return body


def list_canned(session: Session) -> list[Canned]:
    """Every canned reply, by title."""
    return [Canned(c.id, c.title, c.body) for c in session.scalars(sa.select(CannedReply).order_by(CannedReply.title))]


def placeholder_values(session: Session, ticket_id: int, agent_id: int | None) -> dict[str, str]:
    """What the placeholders stand for on this ticket: the agent's display name (never the login name)."""
    ticket = session.get(Ticket, ticket_id)
    display = session.scalar(sa.select(AdminUser.display_name).where(AdminUser.id == agent_id)) \
        if agent_id is not None else None
    return {"customer_name": CUSTOMER_NAME_FALLBACK, "customer_email": ticket.customer_email or "",
            "agent_name": (display or "").strip() or AGENT_NAME_FALLBACK, "ticket_ref": f"T-{ticket_id}"}


def filled_canned(session: Session, ticket_id: int, *, agent_id: int | None) -> list[FilledCanned]:
    """Every canned reply, by title, filled in for the ticket and the agent."""
    values = placeholder_values(session, ticket_id, agent_id)
    return [FilledCanned(c.id, c.title, fill_placeholders(c.body, values)) for c in list_canned(session)]


def _clean(session: Session, title: str, body: str, *, canned_id: int | None = None) -> tuple[str, str]:
    """Trimmed title and body; a taken title (by another reply) or a bad length is a ValidationError."""
    title, body = (title or "").strip(), (body or "").strip()
    errors = {}
    if not 1 <= len(title) <= TITLE_MAX:
        errors["title"] = f"must be 1 to {TITLE_MAX} characters"
    elif session.scalar(sa.select(CannedReply.id).where(CannedReply.title == title,
                                                        CannedReply.id != (canned_id or 0))) is not None:
        errors["title"] = "already exists"
    if not 1 <= len(body) <= BODY_MAX or "\x00" in body:
        errors["body"] = f"must be 1 to {BODY_MAX} characters"
    if errors:
        raise ValidationError("invalid canned reply", errors)
    return title, body


def update_canned(session: Session, canned_id: int, title: str, body: str) -> Canned | None:
    """Change a canned reply's title and text; None if it is gone."""
    row = session.get(CannedReply, canned_id)
    if row is None:
        return None
    row.title, row.body = _clean(session, title, body, canned_id=canned_id)
    session.flush()
    return Canned(row.id, row.title, row.body)


def add_canned(session: Session, title: str, body: str) -> Canned:
    """Save a canned reply; a taken title is a ValidationError."""
    title, body = _clean(session, title, body)
    row = CannedReply(title=title, body=body)
    session.add(row)
    session.flush()
    return Canned(row.id, row.title, row.body)


def delete_canned(session: Session, canned_id: int) -> None:
    """Remove a canned reply (nothing happens if it is already gone)."""
    session.execute(sa.delete(CannedReply).where(CannedReply.id == canned_id))
