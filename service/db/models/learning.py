"""Learning aggregate: the audit log of importance changes, importance proposals and article candidates."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

# Why an importance changed: an admin on the article page, an applied proposal, a script over the API,
# the console, or a re-import whose front matter names an importance.
IMPORTANCE_CHANGE_REASONS = ("manual", "proposal", "api", "cli", "import")
PROPOSAL_STATUSES = ("pending", "applied", "dismissed", "superseded")
CANDIDATE_STATUSES = ("pending", "approved", "merged", "rejected")
CANDIDATE_ACTIONS = ("new", "add_to")  # a new article, or add to the nearest existing section
CANDIDATE_SOURCES = ("template", "llm")


def _created_at() -> Mapped[datetime]:
    return mapped_column(sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


class ImportanceChange(Base):
    """One change of an article's importance: who, when, from → to and why."""

    __tablename__ = "importance_changes"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    article_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="CASCADE"), nullable=False)
    old_importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    new_importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    reason: Mapped[str] = mapped_column(sa.Text, nullable=False)
    proposal_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("importance_proposals.id", ondelete="SET NULL"), nullable=True)
    actor: Mapped[str | None] = mapped_column(sa.Text, nullable=True)  # "admin:<name>", "token:<name>", "cli"
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (
        sa.CheckConstraint(sa.column("reason").in_(IMPORTANCE_CHANGE_REASONS), name="importance_changes_reason"),
        sa.Index("importance_changes_article", "article_id", "created_at"),
    )


class ImportanceProposal(Base):
    """A proposed importance for an article, with the outcome counts that produced it; never applied by itself."""

    __tablename__ = "importance_proposals"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    article_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="CASCADE"), nullable=False)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="pending")
    current_importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    proposed_importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    evidence: Mapped[dict] = mapped_column(JSONB, nullable=False)
    created_at: Mapped[datetime] = _created_at()
    decided_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    decided_by: Mapped[str | None] = mapped_column(sa.Text, nullable=True)

    __table_args__ = (
        sa.CheckConstraint(sa.column("status").in_(PROPOSAL_STATUSES), name="importance_proposals_status"),
        sa.CheckConstraint("proposed_importance BETWEEN 0 AND 2", name="importance_proposals_range"),
        # At most one pending proposal per article.
        sa.Index("importance_proposals_pending_article", "article_id", unique=True,
                 postgresql_where=sa.text("status = 'pending'")),
    )


class ArticleCandidate(Base):
    """A draft article from an agent's public reply, pending until an admin approves, merges or rejects it."""

    __tablename__ = "article_candidates"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    ticket_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"), nullable=True)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="pending")
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    source: Mapped[str] = mapped_column(sa.Text, nullable=False)
    action: Mapped[str] = mapped_column(sa.Text, nullable=False)
    # The nearest existing section and its cosine similarity to the candidate (the dedup decision's inputs).
    target_article_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="SET NULL"), nullable=True)
    target_heading_path: Mapped[list[str] | None] = mapped_column(ARRAY(sa.Text), nullable=True)
    target_similarity: Mapped[float | None] = mapped_column(sa.Double, nullable=True)
    also_asked: Mapped[list] = mapped_column(JSONB, nullable=False, server_default=sa.text("'[]'::jsonb"))
    note: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    article_id: Mapped[int | None] = mapped_column(  # the article it became or was merged into
        sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = _created_at()
    decided_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    decided_by: Mapped[str | None] = mapped_column(sa.Text, nullable=True)

    __table_args__ = (
        sa.CheckConstraint(sa.column("status").in_(CANDIDATE_STATUSES), name="article_candidates_status"),
        sa.CheckConstraint(sa.column("action").in_(CANDIDATE_ACTIONS), name="article_candidates_action"),
        sa.CheckConstraint(sa.column("source").in_(CANDIDATE_SOURCES), name="article_candidates_source"),
        sa.Index("article_candidates_ticket", "ticket_id", unique=True),
        sa.Index("article_candidates_status_created", "status", "created_at"),
    )
