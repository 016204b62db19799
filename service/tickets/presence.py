"""Who is on a ticket now (presence by short polling: a heartbeat row that expires) and who read what (unread).

A ticket is unread for its assignee while a customer message came after the newest message of their last view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import PRESENCE_ACTIVITIES, AdminUser, Ticket, TicketMessage, TicketPresence, TicketRead
from service.tickets.thread import PUBLIC_KINDS
from service.validation import ValidationError


@dataclass(frozen=True)
class Viewer:
    """Another agent on the ticket's page."""

    username: str
    name: str
    activity: str  # viewing | replying

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"username": self.username, "name": self.name, "activity": self.activity}


@dataclass(frozen=True)
class Presence:
    """Who else is on the ticket, and the newest public message (to warn before sending over it)."""

    viewers: list[Viewer]
    latest_public_message_id: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"viewers": [v.to_dict() for v in self.viewers],
                "latest_public_message_id": self.latest_public_message_id}


def unread_expression() -> sa.ColumnElement[bool]:
    """True for a ticket whose assignee has not opened it since the customer last wrote (correlates on tickets)."""
    last_read = (sa.select(TicketRead.last_message_id)
                 .where(TicketRead.ticket_id == Ticket.id, TicketRead.user_id == Ticket.assignee_id)
                 .scalar_subquery())
    newer = sa.exists().where(TicketMessage.ticket_id == Ticket.id, TicketMessage.kind == "customer",
                              TicketMessage.id > sa.func.coalesce(last_read, 0))
    return sa.and_(Ticket.assignee_id.is_not(None), newer)


def mark_read(session: Session, ticket_id: int, user_id: int) -> None:
    """The agent has opened the ticket now, seeing its thread up to the newest message."""
    newest = sa.select(sa.func.coalesce(sa.func.max(TicketMessage.id), 0)).where(
        TicketMessage.ticket_id == ticket_id).scalar_subquery()
    values = {"last_message_id": newest, "read_at": sa.func.clock_timestamp()}
    session.execute(insert(TicketRead).values(ticket_id=ticket_id, user_id=user_id, **values)
                    .on_conflict_do_update(index_elements=["ticket_id", "user_id"], set_=values))


def unread_count(session: Session, user_id: int) -> int:
    """How many of the agent's open or pending tickets have a customer message they have not seen."""
    return session.scalar(sa.select(sa.func.count()).select_from(Ticket).where(
        Ticket.assignee_id == user_id, Ticket.state.in_(("open", "pending")), unread_expression())) or 0


def beat(session: Session, ticket_id: int, user_id: int, activity: str, *, seconds: int) -> None:
    """The agent is on the ticket (``viewing`` or ``replying``) for the next ``seconds`` unless the page beats again."""
    if activity not in PRESENCE_ACTIVITIES:
        raise ValidationError("invalid presence", {"activity": f"must be one of {', '.join(PRESENCE_ACTIVITIES)}"})
    now = sa.func.clock_timestamp()
    values = {"activity": activity, "expires_at": now + timedelta(seconds=seconds), "updated_at": now}
    session.execute(insert(TicketPresence).values(ticket_id=ticket_id, user_id=user_id, **values)
                    .on_conflict_do_update(index_elements=["ticket_id", "user_id"], set_=values))


def presence(session: Session, ticket_id: int, user_id: int | None) -> Presence:
    """The other agents whose heartbeat has not expired, and the newest public message's id."""
    rows = session.execute(
        sa.select(AdminUser.username, AdminUser.display_name, TicketPresence.activity)
        .join(AdminUser, AdminUser.id == TicketPresence.user_id)
        .where(TicketPresence.ticket_id == ticket_id, TicketPresence.expires_at > sa.func.clock_timestamp(),
               TicketPresence.user_id != (user_id if user_id is not None else -1))
        .order_by(AdminUser.username)).all()
    latest = session.scalar(sa.select(sa.func.max(TicketMessage.id)).where(
        TicketMessage.ticket_id == ticket_id, TicketMessage.kind.in_(PUBLIC_KINDS)))
    # Agents see each other by display name when set (the login name otherwise: it is a colleague).
    return Presence([Viewer(u, n or u, a) for u, n, a in rows], latest)


def leave(session: Session, ticket_id: int, user_id: int) -> None:
    """The agent left the page."""
    session.execute(sa.delete(TicketPresence).where(TicketPresence.ticket_id == ticket_id,
                                                    TicketPresence.user_id == user_id))
