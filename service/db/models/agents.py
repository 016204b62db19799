"""The agent's side of a ticket: its thread, state transitions, AI drafts, and the outgoing-mail outbox."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

WORK_STATES = ("open", "pending", "solved")
MESSAGE_KINDS = ("customer", "ai_answer", "agent_reply", "internal_note")
CHANNELS = ("web", "email", "api")


def _now() -> sa.Column:
    return mapped_column(sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


# A sent reply whose edit ratio (word-level diff from its draft) is at least this rewrote the draft: "replaced".
DRAFT_REPLACED_AT = 0.8


class TicketMessage(Base):
    """One entry of a ticket's thread; internal notes are never shown to the customer."""

    __tablename__ = "ticket_messages"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"),
                                           nullable=False)
    kind: Mapped[str] = mapped_column(sa.Text, nullable=False)
    author_user_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="SET NULL"), nullable=True)
    channel: Mapped[str] = mapped_column(sa.Text, nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # The RFC 5322 Message-ID (with angle brackets) of the e-mail this message came in as or went out as.
    email_message_id: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    # Agent replies only: the AI draft the reply started from, the articles it cited, and how much was changed.
    draft_body: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    draft_article_ids: Mapped[list[int] | None] = mapped_column(ARRAY(sa.BigInteger), nullable=True)
    edit_ratio: Mapped[float | None] = mapped_column(sa.Double, nullable=True)
    # Full-text search over the thread (migration 0023).
    search_vector: Mapped[Any | None] = mapped_column(
        TSVECTOR, sa.Computed("to_tsvector('english'::regconfig, coalesce(body, ''))", persisted=True),
        nullable=True, deferred=True)

    __table_args__ = (
        sa.CheckConstraint(sa.column("kind").in_(MESSAGE_KINDS), name="ticket_messages_kind_valid"),
        sa.CheckConstraint(sa.column("channel").in_(CHANNELS), name="ticket_messages_channel_valid"),
        sa.CheckConstraint("edit_ratio IS NULL OR edit_ratio BETWEEN 0 AND 1", name="ticket_messages_edit_ratio_range"),
        sa.Index("ticket_messages_ticket", "ticket_id", "id"),
        # Inbound duplicates are dropped by Message-ID; replies are matched by it (In-Reply-To / References).
        sa.Index("ticket_messages_email_message_id", "email_message_id", unique=True,
                 postgresql_where=sa.text("email_message_id IS NOT NULL")),
        sa.Index("ticket_messages_search_vector", "search_vector", postgresql_using="gin"),
    )


class TicketTransition(Base):
    """A change of a ticket's work state, with who made it (an agent, or NULL: the customer or the system)."""

    __tablename__ = "ticket_transitions"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"),
                                           nullable=False)
    from_state: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    to_state: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    event: Mapped[str] = mapped_column(sa.Text, nullable=False)
    actor: Mapped[str] = mapped_column(sa.Text, nullable=False)  # "customer" | "agent" | "system"
    actor_user_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (sa.Index("ticket_transitions_ticket", "ticket_id", "id"),)


class TicketDraft(Base):
    """An AI draft made for an agent; a reply sent afterwards records the latest one it started from."""

    __tablename__ = "ticket_drafts"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"),
                                           nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    article_ids: Mapped[list[int]] = mapped_column(ARRAY(sa.BigInteger), nullable=False)
    mode: Mapped[str] = mapped_column(sa.Text, nullable=False)  # "llm" | "extractive" | "none"
    instruction: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    # Issue 25 (migration 0022): whether evidence above its threshold backs the draft, and the solved tickets
    # it cites beside the articles.
    grounded: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.true())
    ticket_ids: Mapped[list[int]] = mapped_column(ARRAY(sa.BigInteger), nullable=False, server_default="{}")
    notice: Mapped[str | None] = mapped_column(sa.Text, nullable=True)  # "nothing above the threshold: …"
    # The reply that started from this draft (or from a later one): a used draft is never offered again.
    used_by_message_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("ticket_messages.id", ondelete="SET NULL"), nullable=True)
    # Issue 34 (migration 0033): the newest message when the draft was made (a later customer message makes it
    # stale), and the articles nearest the question that did not clear the gate (never what the draft cites).
    thread_message_id: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    nearest: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, nullable=False, server_default="[]")

    __table_args__ = (sa.Index("ticket_drafts_ticket", "ticket_id", "id"),)


class MailOutbox(Base):
    """An e-mail to send, committed with the message it carries; the mail worker sends it (service.mail)."""

    __tablename__ = "mail_outbox"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"),
                                                  nullable=True)
    to_address: Mapped[str] = mapped_column(sa.Text, nullable=False)
    subject: Mapped[str] = mapped_column(sa.Text, nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    message_id: Mapped[str] = mapped_column(sa.Text, nullable=False)
    in_reply_to: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    references: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    reply_to: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    auto_submitted: Mapped[str | None] = mapped_column(sa.Text, nullable=True)  # RFC 3834, for acknowledgements
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    next_attempt_at: Mapped[datetime] = _now()
    sent_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[datetime] = _now()
    # The display name in From (an agent's, or "Support"); failed_at: given up on; locked_until: a worker's lease.
    from_name: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    failed_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    locked_until: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)

    __table_args__ = (
        sa.Index("mail_outbox_due", "next_attempt_at",
                 postgresql_where=sa.text("sent_at IS NULL AND failed_at IS NULL")),
        sa.Index("mail_outbox_message_id", "message_id", unique=True),
        # The dashboard's count of failed e-mails, and the relay limit's count per address (migration 0024).
        sa.Index("mail_outbox_failed", "failed_at", postgresql_where=sa.text("failed_at IS NOT NULL")),
        sa.Index("mail_outbox_acknowledgements", sa.func.lower(sa.column("to_address")), "created_at",
                 postgresql_where=sa.text("auto_submitted IS NOT NULL")),
    )


class TicketAttachment(Base):
    """A file carried by a thread message (an inbound e-mail's part, or an agent's reply), kept in PostgreSQL."""

    __tablename__ = "ticket_attachments"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    message_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("ticket_messages.id", ondelete="CASCADE"),
                                            nullable=False)
    filename: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content_type: Mapped[str] = mapped_column(sa.Text, nullable=False)
    size: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    sha256: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False, deferred=True)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (sa.Index("ticket_attachments_message", "message_id"),)


class CannedReply(Base):
    """A saved reply agents insert into the composer; ``{customer_email}`` and ``{ticket_ref}`` are filled in."""

    __tablename__ = "canned_replies"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    created_at: Mapped[datetime] = _now()

    __table_args__ = (sa.Index("canned_replies_title", "title", unique=True),)
