"""Ticket aggregate: tickets, their answers, citations and feedback."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base


TICKET_STATUSES = ("received", "answered", "needs_agent", "failed")
# Why a customer sent a ticket to an agent from the help page (service/tickets/helpdesk.py).
ESCALATION_REASONS = ("not_solved", "asked_for_person", "handed_off")
ANSWER_MODES = ("llm", "extractive", "none")


class Ticket(Base):
    """A customer's question; stored before any slow work so it is never lost."""

    __tablename__ = "tickets"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    subject: Mapped[str] = mapped_column(sa.Text, nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    customer_email: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="received")
    # The answerability gate's inputs and decision, kept with the ticket for audit.
    gate: Mapped[dict | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    answered_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    # SHA-256 of the secret handed to the submitter (service.tickets.secrets); NULL for older tickets.
    secret_sha256: Mapped[str | None] = mapped_column(sa.Text, nullable=True, deferred=True)
    # The customer's verdict on the help page: solved by the answer, or sent to an agent (and why).
    resolved_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    escalated_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    escalation_reason: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    # The work state for agents (service.tickets.states): NULL while no person is needed.
    state: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    assignee_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="SET NULL"), nullable=True)
    opened_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    due_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    first_response_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    solved_by: Mapped[str | None] = mapped_column(sa.Text, nullable=True)  # "customer" | "agent"
    # The token in the plus-address replies go to (MAIL_REPLY_TO); random, so it cannot be guessed.
    reply_token: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    # Migration 0028: the acknowledgement is owed (set with the stored ticket, cleared by ``acknowledge``; the
    # recovery sweep completes one a crash left owed), and the recovery sweep's lease on a stuck ticket.
    ack_pending: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.false())
    recovery_lease_until: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    # Migration 0034: the ticket's address opened a valid signed link (only ever e-mailed to it), so it counts as
    # having written to us; cleared when the address changes.
    link_verified_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    # Full-text search over the subject (migration 0023; the thread's words are on ticket_messages).
    search_vector: Mapped[Any | None] = mapped_column(
        TSVECTOR, sa.Computed("to_tsvector('english'::regconfig, coalesce(subject, ''))", persisted=True),
        nullable=True, deferred=True)
    # Set when the customer's data was erased (service.privacy): the row stays, without its text, for the counts.
    erased_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)

    __table_args__ = (
        sa.CheckConstraint(sa.column("status").in_(TICKET_STATUSES), name="tickets_status_valid"),
        sa.CheckConstraint(sa.or_(sa.column("escalation_reason").is_(None),
                                  sa.column("escalation_reason").in_(ESCALATION_REASONS)),
                           name="tickets_escalation_reason_valid"),
        sa.Index("tickets_status_created", "status", "created_at"),
        sa.Index("tickets_created", "created_at"),
        sa.CheckConstraint(sa.or_(sa.column("state").is_(None), sa.column("state").in_(("open", "pending", "solved"))),
                           name="tickets_state_valid"),
        sa.Index("tickets_queue", "state", "due_at"),
        sa.Index("tickets_reply_token", "reply_token", unique=True),
        sa.Index("tickets_search_vector", "search_vector", postgresql_using="gin"),
        sa.Index("tickets_customer_email", "customer_email"),
        sa.Index("tickets_customer_email_lower", sa.func.lower(sa.column("customer_email"))),
        sa.Index("tickets_assignee", "assignee_id", "state"),
        sa.Index("tickets_ack_pending", "created_at", postgresql_where=sa.text("ack_pending")),
    )


class TicketAnswer(Base):
    """The drafted answer: text, how it was made, tokens, timings, and any error."""

    __tablename__ = "ticket_answers"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), nullable=False, index=False
    )
    answer: Mapped[str] = mapped_column(sa.Text, nullable=False)
    mode: Mapped[str] = mapped_column(sa.Text, nullable=False)
    reason: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    model: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    retrieval_ms: Mapped[float | None] = mapped_column(sa.Double, nullable=True)
    llm_ms: Mapped[float | None] = mapped_column(sa.Double, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(sa.Double, nullable=True)
    error: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )

    __table_args__ = (
        sa.CheckConstraint(sa.column("mode").in_(ANSWER_MODES), name="ticket_answers_mode_valid"),
        sa.Index("ticket_answers_ticket", "ticket_id"),
    )


class TicketCitation(Base):
    """An article retrieved for a ticket, with its score breakdown at answer time."""

    __tablename__ = "ticket_citations"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), nullable=False
    )
    article_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="SET NULL"), nullable=True
    )
    article_title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    rank: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    cited: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.false())
    similarity: Mapped[float | None] = mapped_column(sa.Double, nullable=True)  # NULL: keyword search only
    recency: Mapped[float] = mapped_column(sa.Double, nullable=False)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    score: Mapped[float] = mapped_column(sa.Double, nullable=False)
    # The matched section at answer time ("Title › Heading"; NULL for the lead or keyword-only answers).
    section_label: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    section_similarity: Mapped[float | None] = mapped_column(sa.Double, nullable=True)
    # The article's version when it was quoted, filled in by a trigger (migration 0031).
    article_version: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)

    __table_args__ = (
        sa.Index("ticket_citations_ticket", "ticket_id"),
        sa.Index("ticket_citations_article", "article_id"),
    )


class AnswerFeedback(Base):
    """Whether the answer helped, from the customer or an agent."""

    __tablename__ = "answer_feedback"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), nullable=False
    )
    helpful: Mapped[bool] = mapped_column(sa.Boolean, nullable=False)
    comment: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )

    __table_args__ = (sa.Index("answer_feedback_ticket", "ticket_id"),)


