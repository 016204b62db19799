"""The calibrated answer gate (issue 34): the team's reviews of answers, and every calibration made.

``gate_reviews`` holds one verdict per ticket (a second review replaces the first) with the gate's decision and
confidence when it was reviewed. ``gate_calibrations`` is append-only: each row is one fit (the team's, or a reset
to the shipped default) with its target, threshold and curve; the newest is in force, the rest are its audit log.

Revision ID: 0029
Revises: 0026
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gate_reviews",
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("answer_correct", sa.Boolean, nullable=False),
        sa.Column("reviewer", sa.Text, nullable=True),
        sa.Column("answered", sa.Boolean, nullable=False),
        sa.Column("confidence", sa.Float, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "gate_calibrations",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("actor", sa.Text, nullable=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("target_precision", sa.Float, nullable=False),
        sa.Column("confidence_level", sa.Float, nullable=False),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("labels", sa.Integer, nullable=False),
        sa.Column("calibrator", JSONB, nullable=False),
        sa.Column("summary", JSONB, nullable=False),
        sa.CheckConstraint("source IN ('default', 'team')", name="gate_calibrations_source"),
    )


def downgrade() -> None:
    op.drop_table("gate_calibrations")
    op.drop_table("gate_reviews")
