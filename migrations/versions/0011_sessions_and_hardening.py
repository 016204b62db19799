"""Hardening: server-side admin sessions, login throttles per (username, client), importance at fixed precision.

- ``admin_sessions``: one row per login; the cookie holds a random key whose SHA-256 is kept here. Logout, "log
  out everywhere", a password change, the idle timeout and the absolute lifetime end a session on the server.
- ``login_throttles``: failed logins per (normalised username, client address) and until when that pair waits.
- ``knowledge_base.importance``: existing values rounded to 3 decimals (as the application now stores them), and
  a CHECK that it is 0 or at least 1e-100: an importance of 5e-324 made ``recency × weight × importance``
  underflow and every search fail. (Not a CHECK on 3 decimals: bulk loads, benchmarks and tests write any value.)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ROUNDED = "round(importance::numeric, 3)::double precision"
NOT_TINY_CHECK = "importance = 0 OR importance >= 1e-100"


def upgrade() -> None:
    op.create_table(
        "admin_sessions",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("admin_id", sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("key_sha256", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("admin_sessions_key_sha256", "admin_sessions", ["key_sha256"], unique=True)
    op.create_index("admin_sessions_admin_id", "admin_sessions", ["admin_id"])
    op.create_table(
        "login_throttles",
        sa.Column("bucket", sa.Text, primary_key=True),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("login_throttles_expires_at", "login_throttles", ["expires_at"])
    op.execute(f"UPDATE knowledge_base SET importance = {ROUNDED} WHERE importance <> {ROUNDED}")
    op.create_check_constraint("knowledge_base_importance_not_tiny", "knowledge_base", NOT_TINY_CHECK)


def downgrade() -> None:
    op.drop_constraint("knowledge_base_importance_not_tiny", "knowledge_base", type_="check")
    op.drop_table("login_throttles")
    op.drop_table("admin_sessions")
