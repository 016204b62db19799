"""Exactly once (issue 33): the first result of each reply's ``Idempotency-Key``; a ticket's owed
acknowledgement (``ack_pending``) and the recovery sweep's lease on it (``recovery_lease_until``).

Revision ID: 0028
Revises: 0026
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0028"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reply_idempotency_keys",
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("response", JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.add_column("tickets", sa.Column("ack_pending", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("tickets", sa.Column("recovery_lease_until", sa.DateTime(timezone=True), nullable=True))
    op.create_index("tickets_ack_pending", "tickets", ["created_at"], postgresql_where=sa.text("ack_pending"))


def downgrade() -> None:
    op.drop_index("tickets_ack_pending", table_name="tickets")
    op.drop_column("tickets", "recovery_lease_until")
    op.drop_column("tickets", "ack_pending")
    op.drop_table("reply_idempotency_keys")
