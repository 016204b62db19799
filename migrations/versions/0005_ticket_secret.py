"""Per-ticket secret (stored as SHA-256): the submitter's proof for feedback and the customer's ticket page.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tickets", sa.Column("secret_sha256", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("tickets", "secret_sha256")
