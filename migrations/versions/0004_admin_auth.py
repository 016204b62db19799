"""Admin accounts (hashed passwords) and API tokens (stored as SHA-256 of the secret).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "admin_users",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("username", sa.Text, nullable=False),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("char_length(username) BETWEEN 1 AND 64", name="admin_users_username_length"),
    )
    op.create_index("admin_users_username", "admin_users", ["username"], unique=True)
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("token_sha256", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("char_length(name) BETWEEN 1 AND 100", name="api_tokens_name_length"),
    )
    op.create_index("api_tokens_token_sha256", "api_tokens", ["token_sha256"], unique=True)


def downgrade() -> None:
    op.drop_table("api_tokens")
    op.drop_table("admin_users")
