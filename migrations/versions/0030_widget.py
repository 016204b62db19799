"""The embeddable chat widget (issue 35): conversations (one per visitor token) and their messages.

A conversation is found only through its signed visitor token; ``token_generation`` is the generation of the one
token that still works (a resume issues the next, so an older, replayed token is refused). ``ticket_id`` is set
once the visitor talks to a person, and the agent's replies are read from that ticket's thread.

Revision ID: 0030
Revises: 0026
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "widget_conversations",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("token_generation", sa.Integer, nullable=False, server_default="1"),
        sa.Column("user_id", sa.Text, nullable=True),
        sa.Column("email", sa.Text, nullable=True),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("locale", sa.Text, nullable=False, server_default="en"),
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("widget_conversations_user", "widget_conversations", ["user_id"])
    op.create_table(
        "widget_messages",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("conversation_id", sa.BigInteger,
                  sa.ForeignKey("widget_conversations.id", ondelete="CASCADE"), nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("citations", sa.dialects.postgresql.JSONB, nullable=True),
        sa.Column("gate", sa.dialects.postgresql.JSONB, nullable=True),
        sa.Column("helpful", sa.Boolean, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("role IN ('visitor', 'assistant')", name="widget_messages_role_valid"),
    )
    op.create_index("widget_messages_conversation", "widget_messages", ["conversation_id", "id"])


def downgrade() -> None:
    op.drop_table("widget_messages")
    op.drop_table("widget_conversations")
