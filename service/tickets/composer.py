"""The reply an agent is typing, saved as typed (issue 25 item 1): one text per agent and ticket, restored on
reload, deleted when the reply is sent. Use cases take a session and never commit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import ComposerText, TicketMessage
from service.tickets.validation import BODY_MAX
from service.validation import ValidationError

COMPOSER_FIELDS = ("body", "after_message_id")


class ComposerStale(ValueError):
    """A save from before the agent's last reply (an autosave still in flight when the reply was sent)."""


@dataclass(frozen=True)
class Composer:
    """The unsent text (empty when none) and when it was last saved."""

    body: str
    updated_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"body": self.body, "updated_at": self.updated_at.isoformat() if self.updated_at else None}


def load_composer(session: Session, ticket_id: int, user_id: int) -> Composer:
    """The agent's saved text for the ticket, or an empty one."""
    row = session.get(ComposerText, (ticket_id, user_id))
    return Composer(row.body, row.updated_at) if row is not None else Composer("", None)


def clean_composer(fields: dict[str, Any]) -> str:
    """``body``: a string of at most 20,000 characters without NUL (empty is allowed: the agent cleared it)."""
    errors = {name: "unknown field" for name in fields if name not in COMPOSER_FIELDS}
    body = fields.get("body")
    if not isinstance(body, str) or len(body) > BODY_MAX or "\x00" in body:
        errors["body"] = f"is required: a string of at most {BODY_MAX} characters, without NUL"
    after = fields.get("after_message_id")
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        errors["after_message_id"] = "must be a message id (a whole number, 0 for none)"
    if errors:
        raise ValidationError("invalid composer text", errors)
    return body


def save_composer(session: Session, ticket_id: int, user_id: int, fields: dict[str, Any]) -> Composer:
    """Replace the agent's saved text (an empty text deletes it); ComposerStale for a save older than the agent's
    last reply: ``after_message_id`` (the newest reply of theirs the page knew) is older than their newest, or
    the text is the reply they just sent. Saving it would bring back, and let them send again, a sent reply."""
    body = clean_composer(fields)
    last = session.execute(sa.select(TicketMessage.id, TicketMessage.body).where(
        TicketMessage.ticket_id == ticket_id, TicketMessage.author_user_id == user_id,
        TicketMessage.kind == "agent_reply").order_by(TicketMessage.id.desc()).limit(1)).one_or_none()
    after = fields.get("after_message_id")
    if last is not None and ((after is not None and after < last.id) or body.strip() == last.body.strip()):
        raise ComposerStale(f"not saved: you sent a reply on this ticket after this text was typed (message {last.id})")
    if not body.strip():
        clear_composer(session, ticket_id, user_id)
        return Composer("", None)
    statement = insert(ComposerText).values(ticket_id=ticket_id, user_id=user_id, body=body)
    statement = statement.on_conflict_do_update(
        index_elements=["ticket_id", "user_id"], set_={"body": statement.excluded.body, "updated_at": sa.func.now()}
    ).returning(ComposerText.updated_at)
    return Composer(body, session.execute(statement).scalar_one())


def clear_composer(session: Session, ticket_id: int, user_id: int | None) -> None:
    """Forget the agent's unsent text (the reply was sent)."""
    if user_id is not None:
        session.execute(sa.delete(ComposerText).where(ComposerText.ticket_id == ticket_id,
                                                      ComposerText.user_id == user_id))


def last_reply_id(session: Session, ticket_id: int, user_id: int | None) -> int:
    """The id of the agent's newest reply on the ticket (0 for none): what the composer's saves are after."""
    if user_id is None:
        return 0
    return session.scalar(sa.select(sa.func.max(TicketMessage.id)).where(
        TicketMessage.ticket_id == ticket_id, TicketMessage.author_user_id == user_id,
        TicketMessage.kind == "agent_reply")) or 0
