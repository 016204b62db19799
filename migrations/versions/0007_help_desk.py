"""Help desk outcomes: when the customer marked a ticket solved, or escalated it to an agent and why.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tickets", sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("tickets", sa.Column("escalated_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("tickets", sa.Column("escalation_reason", sa.Text, nullable=True))
    op.create_check_constraint(
        "tickets_escalation_reason_valid", "tickets",
        "escalation_reason IS NULL OR escalation_reason IN ('not_solved', 'asked_for_person', 'handed_off')",
    )
    op.create_index("tickets_created", "tickets", ["created_at"])


def downgrade() -> None:
    op.drop_index("tickets_created", table_name="tickets")
    op.drop_constraint("tickets_escalation_reason_valid", "tickets", type_="check")
    op.drop_column("tickets", "escalation_reason")
    op.drop_column("tickets", "escalated_at")
    op.drop_column("tickets", "resolved_at")
