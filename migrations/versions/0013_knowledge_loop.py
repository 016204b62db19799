"""The knowledge loop: the audit log of importance changes, importance proposals, article candidates.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _id() -> sa.Column:
    return sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True)


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def _article(name: str, ondelete: str, nullable: bool) -> sa.Column:
    return sa.Column(name, sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete=ondelete), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "importance_proposals", _id(), _article("article_id", "CASCADE", False),
        sa.Column("status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("current_importance", sa.Double, nullable=False),
        sa.Column("proposed_importance", sa.Double, nullable=False),
        sa.Column("evidence", JSONB, nullable=False), _created_at(),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.Text, nullable=True),
        sa.CheckConstraint("status IN ('pending', 'applied', 'dismissed', 'superseded')",
                           name="importance_proposals_status"),
        sa.CheckConstraint("proposed_importance BETWEEN 0 AND 2", name="importance_proposals_range"),
    )
    op.create_index("importance_proposals_pending_article", "importance_proposals", ["article_id"], unique=True,
                    postgresql_where=sa.text("status = 'pending'"))
    op.create_table(
        "importance_changes", _id(), _article("article_id", "CASCADE", False),
        sa.Column("old_importance", sa.Double, nullable=False),
        sa.Column("new_importance", sa.Double, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("proposal_id", sa.BigInteger, sa.ForeignKey("importance_proposals.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("actor", sa.Text, nullable=True), _created_at(),
        sa.CheckConstraint("reason IN ('manual', 'proposal', 'api', 'cli', 'import')",
                           name="importance_changes_reason"),
    )
    op.create_index("importance_changes_article", "importance_changes", ["article_id", "created_at"])
    op.create_table(
        "article_candidates", _id(),
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"), nullable=True),
        sa.Column("status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        _article("target_article_id", "SET NULL", True),
        sa.Column("target_heading_path", ARRAY(sa.Text), nullable=True),
        sa.Column("target_similarity", sa.Double, nullable=True),
        sa.Column("also_asked", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("note", sa.Text, nullable=True),
        _article("article_id", "SET NULL", True), _created_at(),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.Text, nullable=True),
        sa.CheckConstraint("status IN ('pending', 'approved', 'merged', 'rejected')", name="article_candidates_status"),
        sa.CheckConstraint("action IN ('new', 'add_to')", name="article_candidates_action"),
        sa.CheckConstraint("source IN ('template', 'llm')", name="article_candidates_source"),
    )
    op.create_index("article_candidates_ticket", "article_candidates", ["ticket_id"], unique=True)
    op.create_index("article_candidates_status_created", "article_candidates", ["status", "created_at"])


def downgrade() -> None:
    op.drop_table("article_candidates")
    op.drop_table("importance_changes")
    op.drop_table("importance_proposals")
