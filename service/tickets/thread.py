"""A ticket's thread (``ticket_messages``): the question and follow-ups, the AI answer, agent replies, notes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AdminUser, TicketMessage

PUBLIC_KINDS = ("customer", "ai_answer", "agent_reply")


@dataclass(frozen=True)
class MessageView:
    """One thread entry as the API and pages show it."""

    id: int
    ticket_id: int
    kind: str
    author: str | None  # the agent's username; None for the customer and the AI
    channel: str
    body: str
    email_message_id: str | None
    created_at: datetime
    edit_ratio: float | None
    author_display_name: str | None = None  # what the customer sees: the agent's display name ("Support" if unset)

    @property
    def internal(self) -> bool:
        """Whether only agents may see it."""
        return self.kind == "internal_note"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for agents; the customer's page renders ``public_thread``)."""
        return {"id": self.id, "ticket_id": self.ticket_id, "kind": self.kind, "author": self.author,
                "channel": self.channel, "body": self.body, "email_message_id": self.email_message_id,
                "created_at": self.created_at.isoformat(), "edit_ratio": self.edit_ratio}


def add_message(session: Session, ticket_id: int, kind: str, body: str, *, channel: str,
                author_user_id: int | None = None, email_message_id: str | None = None,
                **draft: Any) -> TicketMessage:
    """Append to the thread (``draft``: draft_body, draft_article_ids, edit_ratio for agent replies)."""
    message = TicketMessage(ticket_id=ticket_id, kind=kind, body=body, channel=channel,
                            author_user_id=author_user_id, email_message_id=email_message_id, **draft)
    session.add(message)
    session.flush()
    session.refresh(message, ["created_at"])
    return message


def _views(session: Session, where: list) -> list[MessageView]:
    rows = session.execute(sa.select(TicketMessage, AdminUser.username, AdminUser.display_name)
                           .outerjoin(AdminUser, AdminUser.id == TicketMessage.author_user_id)
                           .where(*where).order_by(TicketMessage.id)).all()
    return [MessageView(m.id, m.ticket_id, m.kind, name, m.channel, m.body, m.email_message_id, m.created_at,
                        m.edit_ratio, shown) for m, name, shown in rows]


def ticket_thread(session: Session, ticket_id: int) -> list[MessageView]:
    """Every message, internal notes included: for agents only."""
    return _views(session, [TicketMessage.ticket_id == ticket_id])


def public_thread(session: Session, ticket_id: int) -> list[MessageView]:
    """What the customer may see: never an internal note."""
    return _views(session, [TicketMessage.ticket_id == ticket_id, TicketMessage.kind.in_(PUBLIC_KINDS)])


def message_view(session: Session, message_id: int) -> MessageView:
    """One message by id."""
    return _views(session, [TicketMessage.id == message_id])[0]
