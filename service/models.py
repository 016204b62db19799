"""Tables, declared once; migrations/ creates the same schema (a test compares them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .config import VECTOR_DIMENSIONS

TITLE_MAX = 300
CONTENT_MAX = 100_000
CATEGORY_MAX = 64
IMPORTANCE_MIN = 0.0
IMPORTANCE_MAX = 2.0


class BinaryVector(VECTOR):
    """pgvector's column type, but binds numpy arrays as they are.

    psycopg then sends them with pgvector's binary dumper (registered on every
    connection) instead of formatting 1536 floats as text.
    """

    cache_ok = True

    def bind_processor(self, dialect: sa.Dialect) -> Any:
        def process(value: Any) -> Any:
            if value is None:
                return None
            return np.asarray(value, dtype=np.float32)

        return process

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        def process(value: Any) -> Any:
            if value is None or isinstance(value, np.ndarray):
                return value
            return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)

        return process


class Base(DeclarativeBase):
    """Declarative base of all tables."""


class Article(Base):
    """A knowledge-base article and its embedding."""

    __tablename__ = "knowledge_base"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content: Mapped[str] = mapped_column(sa.Text, nullable=False)
    category: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    embedding: Mapped[Any | None] = mapped_column(BinaryVector(VECTOR_DIMENSIONS), nullable=True, deferred=True)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False, server_default=sa.text("1.0"))
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    embedding_model: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    content_sha256: Mapped[str | None] = mapped_column(sa.Text, nullable=True)

    __table_args__ = (
        sa.CheckConstraint(
            f"importance >= {IMPORTANCE_MIN} AND importance <= {IMPORTANCE_MAX}",
            name="knowledge_base_importance_range",
        ),
        sa.CheckConstraint(
            f"char_length(title) BETWEEN 1 AND {TITLE_MAX}", name="knowledge_base_title_length"
        ),
        sa.CheckConstraint(
            f"char_length(content) BETWEEN 1 AND {CONTENT_MAX}", name="knowledge_base_content_length"
        ),
        sa.CheckConstraint(
            f"category IS NULL OR char_length(category) <= {CATEGORY_MAX}",
            name="knowledge_base_category_length",
        ),
        # HNSW with the operator class that matches the <=> (cosine distance) queries.
        sa.Index(
            "knowledge_base_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        sa.Index("knowledge_base_embedding_model", "embedding_model"),
    )


class AppState(Base):
    """Small key/value facts about this database (e.g. when it was seeded)."""

    __tablename__ = "app_state"

    key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    value: Mapped[str] = mapped_column(sa.Text, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


TICKET_STATUSES = ("received", "answered", "needs_agent", "failed")
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

    __table_args__ = (
        sa.CheckConstraint(f"status IN {TICKET_STATUSES!r}", name="tickets_status_valid"),
        sa.Index("tickets_status_created", "status", "created_at"),
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
        sa.CheckConstraint(f"mode IN {ANSWER_MODES!r}", name="ticket_answers_mode_valid"),
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
    similarity: Mapped[float] = mapped_column(sa.Double, nullable=False)
    recency: Mapped[float] = mapped_column(sa.Double, nullable=False)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    score: Mapped[float] = mapped_column(sa.Double, nullable=False)

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
