"""Columns and a table that the e-mail, agent and speed work share (agreed up front so they merge cleanly).

- ``admin_users.display_name``, ``email``, ``notify_by_email``: the name customers see on replies (never the login
  name), where an agent's notifications go, and whether they want them.
- ``mail_outbox.from_name``: the display name in an outgoing message's From (an agent's, or "Support").
  ``failed_at`` marks a message given up on (a 5xx, or too many temporary failures); ``locked_until`` is the lease
  a worker holds while it talks SMTP outside any transaction.
- ``ticket_vectors``: one vector per ticket question (the model's width, unit length, half precision), with the
  ticket's ``solved_at`` copied in so that a filtered index needs no join ("similar solved tickets").
- ``ticket_attachments``: files carried by a thread message (inbound e-mail, or an agent's reply), stored in
  PostgreSQL with their size and SHA-256.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import HALFVEC

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("admin_users", sa.Column("display_name", sa.Text, nullable=True))
    op.add_column("admin_users", sa.Column("email", sa.Text, nullable=True))
    op.add_column("admin_users", sa.Column("notify_by_email", sa.Boolean, nullable=False,
                                           server_default=sa.true()))
    op.add_column("mail_outbox", sa.Column("from_name", sa.Text, nullable=True))
    op.add_column("mail_outbox", sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("mail_outbox", sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "ticket_vectors",
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("embedding_model", sa.Text, nullable=False),
        sa.Column("embedding", HALFVEC(), nullable=False),
        sa.Column("solved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "ticket_attachments",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("message_id", sa.BigInteger, sa.ForeignKey("ticket_messages.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("filename", sa.Text, nullable=False),
        sa.Column("content_type", sa.Text, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("ticket_attachments_message", "ticket_attachments", ["message_id"])
    op.create_index("ticket_vectors_solved", "ticket_vectors", ["solved_at"],
                    postgresql_where=sa.text("solved_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_table("ticket_attachments")
    op.drop_table("ticket_vectors")
    for column in ("locked_until", "failed_at", "from_name"):
        op.drop_column("mail_outbox", column)
    for column in ("notify_by_email", "email", "display_name"):
        op.drop_column("admin_users", column)
