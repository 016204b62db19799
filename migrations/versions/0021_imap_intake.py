"""IMAP intake (issue 24 item 9): where the poller is in each mailbox folder it fetches from.

``imap_folders`` holds one row per (account, folder): the folder's UIDVALIDITY, the highest UID already stored
(``last_uid``), and ``baseline_uid``, the highest UID present when the folder was first seen or its UIDVALIDITY
changed (under the \\Seen policy, mail at or below it that was already read is not taken). A message that keeps
failing is counted in ``failed_uid``/``failed_attempts`` with ``last_error``, then left in the mailbox.

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "imap_folders",
        sa.Column("account", sa.Text, primary_key=True),
        sa.Column("folder", sa.Text, primary_key=True),
        sa.Column("uidvalidity", sa.BigInteger, nullable=False),
        sa.Column("last_uid", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("baseline_uid", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("failed_uid", sa.BigInteger, nullable=True),
        sa.Column("failed_attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("imap_folders")
