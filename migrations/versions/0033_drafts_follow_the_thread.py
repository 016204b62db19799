"""Drafts that follow the conversation (issue 34 item 8).

- ``ticket_drafts.thread_message_id``: the newest message of the thread when the draft was made; a customer
  message after it makes the draft stale, so the next one is remade from the whole thread.
- ``ticket_drafts.nearest``: the articles nearest the question that did not clear the answer gate
  (``[{article_id, title, section, similarity}]``), shown to the agent as "nearest, below the threshold", never
  as what the draft cites.

Revision ID: 0033
Revises: 0026
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ticket_drafts", sa.Column("thread_message_id", sa.BigInteger, nullable=True))
    op.add_column("ticket_drafts", sa.Column("nearest", JSONB, nullable=False, server_default="[]"))


def downgrade() -> None:
    op.drop_column("ticket_drafts", "nearest")
    op.drop_column("ticket_drafts", "thread_message_id")
