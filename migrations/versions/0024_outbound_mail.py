"""Outbound mail (issue 24, mail-out): the due index skips failed e-mails; failed e-mails and recent
acknowledgements per address are found by index (the dashboard count, and the relay limit).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("mail_outbox_due", table_name="mail_outbox")
    op.create_index("mail_outbox_due", "mail_outbox", ["next_attempt_at"],
                    postgresql_where=sa.text("sent_at IS NULL AND failed_at IS NULL"))
    op.create_index("mail_outbox_failed", "mail_outbox", ["failed_at"],
                    postgresql_where=sa.text("failed_at IS NOT NULL"))
    op.create_index("mail_outbox_acknowledgements", "mail_outbox", [sa.text("lower(to_address)"), "created_at"],
                    postgresql_where=sa.text("auto_submitted IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("mail_outbox_acknowledgements", table_name="mail_outbox")
    op.drop_index("mail_outbox_failed", table_name="mail_outbox")
    op.drop_index("mail_outbox_due", table_name="mail_outbox")
    op.create_index("mail_outbox_due", "mail_outbox", ["next_attempt_at"], postgresql_where=sa.text("sent_at IS NULL"))
