"""The embeddable chat widget (migration 0030): a visitor's conversation and its messages."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

WIDGET_ROLES = ("visitor", "assistant")


class WidgetConversation(Base):
    """One visitor's chat, reached only through its signed token (``token_generation``: the one that works)."""

    __tablename__ = "widget_conversations"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    token_generation: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="1")
    user_id: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    email: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    name: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    locale: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="en")
    ticket_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())

    __table_args__ = (sa.Index("widget_conversations_user", "user_id"),)


class WidgetMessage(Base):
    """A visitor's question or the assistant's answer (with its citations, gate decision and feedback)."""

    __tablename__ = "widget_messages"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("widget_conversations.id", ondelete="CASCADE"), nullable=False)
    role: Mapped[str] = mapped_column(sa.Text, nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    citations: Mapped[list | None] = mapped_column(JSONB, nullable=True)
    gate: Mapped[dict | None] = mapped_column(JSONB, nullable=True)
    helpful: Mapped[bool | None] = mapped_column(sa.Boolean, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())

    __table_args__ = (
        sa.CheckConstraint(sa.column("role").in_(WIDGET_ROLES), name="widget_messages_role_valid"),
        sa.Index("widget_messages_conversation", "conversation_id", "id"),
    )
