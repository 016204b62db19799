"""Inbound e-mail is stored before it is interpreted (issue 24): raw bytes (capped), SHA-256, dedupe key, and
what became of it — a ticket, a follow-up, ignored, a duplicate, or a quarantine an admin can retry or discard.

``dedupe_key`` is the Message-ID, else ``sha256:<hex>`` of the raw bytes, so a relay's retry or a webhook replay
is stored once. ``related_ticket_id`` is the ticket a message claimed to answer when its sender did not match.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

STATUSES = ("received", "processed", "ignored", "duplicate", "quarantined", "discarded")


def upgrade() -> None:
    op.create_table(
        "inbound_emails",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("dedupe_key", sa.Text, nullable=False),
        sa.Column("message_id", sa.Text, nullable=True),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("raw", sa.LargeBinary, nullable=False),
        sa.Column("raw_truncated", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("sender", sa.Text, nullable=True),
        sa.Column("subject", sa.Text, nullable=True),
        sa.Column("cc", ARRAY(sa.Text), nullable=True),
        sa.Column("status", sa.Text, nullable=False, server_default="received"),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"), nullable=True),
        sa.Column("related_ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(sa.column("status").in_(STATUSES), name="inbound_emails_status_valid"),
    )
    op.create_index("inbound_emails_dedupe_key", "inbound_emails", ["dedupe_key"], unique=True)
    op.create_index("inbound_emails_ticket", "inbound_emails", ["ticket_id"])
    op.create_index("inbound_emails_open", "inbound_emails", ["status", "id"],
                    postgresql_where=sa.text("status IN ('received', 'quarantined')"))


def downgrade() -> None:
    op.drop_table("inbound_emails")
