"""Tickets, their answers, citations (audit of why articles were used) and feedback.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tickets",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("customer_email", sa.Text, nullable=True),
        sa.Column("status", sa.Text, nullable=False, server_default="received"),
        sa.Column("gate", postgresql.JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('received', 'answered', 'needs_agent', 'failed')",
                           name="tickets_status_valid"),
    )
    op.create_index("tickets_status_created", "tickets", ["status", "created_at"])
    op.create_table(
        "ticket_answers",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), nullable=False),
        sa.Column("answer", sa.Text, nullable=False),
        sa.Column("mode", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("model", sa.Text, nullable=True),
        sa.Column("prompt_tokens", sa.Integer, nullable=True),
        sa.Column("completion_tokens", sa.Integer, nullable=True),
        sa.Column("retrieval_ms", sa.Double, nullable=True),
        sa.Column("llm_ms", sa.Double, nullable=True),
        sa.Column("latency_ms", sa.Double, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("mode IN ('llm', 'extractive', 'none')", name="ticket_answers_mode_valid"),
    )
    op.create_index("ticket_answers_ticket", "ticket_answers", ["ticket_id"])
    op.create_table(
        "ticket_citations",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), nullable=False),
        sa.Column("article_id", sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("article_title", sa.Text, nullable=False),
        sa.Column("rank", sa.Integer, nullable=False),
        sa.Column("cited", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("similarity", sa.Double, nullable=True),  # NULL when only keyword search ran
        sa.Column("recency", sa.Double, nullable=False),
        sa.Column("importance", sa.Double, nullable=False),
        sa.Column("score", sa.Double, nullable=False),
    )
    op.create_index("ticket_citations_ticket", "ticket_citations", ["ticket_id"])
    op.create_index("ticket_citations_article", "ticket_citations", ["article_id"])
    op.create_table(
        "answer_feedback",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), nullable=False),
        sa.Column("helpful", sa.Boolean, nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("answer_feedback_ticket", "answer_feedback", ["ticket_id"])


def downgrade() -> None:
    op.drop_table("answer_feedback")
    op.drop_table("ticket_citations")
    op.drop_table("ticket_answers")
    op.drop_table("tickets")
