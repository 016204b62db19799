"""Signed-link trust and the IMAP poller's status (issue 32 leftovers).

- ``tickets.link_verified_at``: when the ticket's address opened a valid signed link (one only ever e-mailed to
  it): that address then counts as having written to us, so its acknowledgements may quote it. Cleared when the
  ticket's address changes.
- ``imap_folders.poll_error``, ``poll_failures``, ``poll_error_since``, ``poll_retry_at``: the poller's last failed
  pass for the folder (a refused login, an unverified certificate …), shown on /admin/mail until a pass succeeds.
  ``uidvalidity`` may be NULL: a folder whose first pass failed before it was ever selected.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tickets", sa.Column("link_verified_at", sa.DateTime(timezone=True), nullable=True))
    op.alter_column("imap_folders", "uidvalidity", existing_type=sa.BigInteger, nullable=True)
    op.add_column("imap_folders", sa.Column("poll_error", sa.Text, nullable=True))
    op.add_column("imap_folders", sa.Column("poll_failures", sa.Integer, nullable=False, server_default="0"))
    op.add_column("imap_folders", sa.Column("poll_error_since", sa.DateTime(timezone=True), nullable=True))
    op.add_column("imap_folders", sa.Column("poll_retry_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("imap_folders", "poll_retry_at")
    op.drop_column("imap_folders", "poll_error_since")
    op.drop_column("imap_folders", "poll_failures")
    op.drop_column("imap_folders", "poll_error")
    op.execute("DELETE FROM imap_folders WHERE uidvalidity IS NULL")
    op.alter_column("imap_folders", "uidvalidity", existing_type=sa.BigInteger, nullable=False)
    op.drop_column("tickets", "link_verified_at")
