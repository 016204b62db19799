"""The agents' team work (migration 0023): tags, reads (unread markers), presence (collisions), CSAT ratings."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

TAG_PATTERN = "^[a-z0-9][a-z0-9_-]{0,39}$"
PRESENCE_ACTIVITIES = ("viewing", "replying")
SUBJECT_SEARCH_VECTOR = "to_tsvector('english'::regconfig, coalesce(subject, ''))"
BODY_SEARCH_VECTOR = "to_tsvector('english'::regconfig, coalesce(body, ''))"


def _ticket_key() -> Mapped[int]:
    return mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True)


def _user_key() -> Mapped[int]:
    return mapped_column(sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="CASCADE"), primary_key=True)


def _now() -> Mapped[datetime]:
    return mapped_column(sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


class TicketTag(Base):
    """One label on a ticket (lower case, 1-40 of a-z 0-9 _ -)."""

    __tablename__ = "ticket_tags"

    ticket_id: Mapped[int] = _ticket_key()
    tag: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (
        sa.CheckConstraint(f"tag ~ '{TAG_PATTERN}'", name="ticket_tags_tag_valid"),
        sa.Index("ticket_tags_tag", "tag"),
    )


class TicketRead(Base):
    """The newest thread message an agent had when they last opened a ticket: later customer messages are unread.

    Message ids, not clocks: a message's ``created_at`` is its transaction's start, which can be before a view
    that commits earlier.
    """

    __tablename__ = "ticket_reads"

    ticket_id: Mapped[int] = _ticket_key()
    user_id: Mapped[int] = _user_key()
    last_message_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    read_at: Mapped[datetime] = _now()


class TicketPresence(Base):
    """An agent on a ticket's page now (viewing or replying), until ``expires_at`` unless the page beats again."""

    __tablename__ = "ticket_presence"

    ticket_id: Mapped[int] = _ticket_key()
    user_id: Mapped[int] = _user_key()
    activity: Mapped[str] = mapped_column(sa.Text, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    updated_at: Mapped[datetime] = _now()

    __table_args__ = (
        sa.CheckConstraint(sa.column("activity").in_(PRESENCE_ACTIVITIES), name="ticket_presence_activity_valid"),
    )


class TicketRating(Base):
    """The customer's "How did we do?" for a solved ticket; a second rating replaces the first."""

    __tablename__ = "ticket_ratings"

    ticket_id: Mapped[int] = _ticket_key()
    good: Mapped[bool] = mapped_column(sa.Boolean, nullable=False)
    comment: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    solved_by: Mapped[str | None] = mapped_column(sa.Text, nullable=True)  # the ticket's, when rated
    agent_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
