"""The agent's workspace (issue 25 items 1-3): unsent composer text per agent and ticket, honest drafts.

- ``ticket_composer_texts``: what an agent has typed in a ticket's reply box and not sent yet, saved as typed
  (one row per agent and ticket, replaced on every save, deleted when the reply is sent).
- ``ticket_drafts.grounded``: whether the draft rests on evidence that cleared its threshold (an article over the
  answer gate, or a similar solved ticket); ``ticket_drafts.ticket_ids``: the solved tickets it cites;
  ``ticket_drafts.notice``: the line telling the agent that no article clears the gate (best match and score).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ticket_composer_texts",
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("user_id", sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.add_column("ticket_drafts", sa.Column("grounded", sa.Boolean, nullable=False, server_default=sa.true()))
    op.add_column("ticket_drafts", sa.Column("ticket_ids", ARRAY(sa.BigInteger), nullable=False,
                                             server_default="{}"))
    op.add_column("ticket_drafts", sa.Column("notice", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("ticket_drafts", "notice")
    op.drop_column("ticket_drafts", "ticket_ids")
    op.drop_column("ticket_drafts", "grounded")
    op.drop_table("ticket_composer_texts")
