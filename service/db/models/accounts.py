"""Accounts aggregate: admin users, API tokens, and the rate-limit counters that guard them."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base, length_between


USERNAME_MAX = 64
ROLES = ("admin", "agent")  # admin: everything; agent: tickets and reading the knowledge base
TOKEN_NAME_MAX = 100


class AdminUser(Base):
    """Someone who may curate the knowledge base; the password is stored as a werkzeug hash."""

    __tablename__ = "admin_users"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    username: Mapped[str] = mapped_column(sa.Text, nullable=False)
    password_hash: Mapped[str] = mapped_column(sa.Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    last_login_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    role: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="admin")
    # What customers see on replies (never the login name), where notifications go, and whether to send them.
    display_name: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    email: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    notify_by_email: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.true())

    __table_args__ = (
        sa.CheckConstraint(length_between("username", 1, USERNAME_MAX), name="admin_users_username_length"),
        sa.CheckConstraint(sa.column("role").in_(ROLES), name="admin_users_role_valid"),
        sa.Index("admin_users_username", "username", unique=True),
    )


class ApiToken(Base):
    """A script's credential; only the SHA-256 of the secret is kept, so a database leak reveals no token."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    name: Mapped[str] = mapped_column(sa.Text, nullable=False)
    token_sha256: Mapped[str] = mapped_column(sa.Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    role: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="admin")

    __table_args__ = (
        sa.CheckConstraint(length_between("name", 1, TOKEN_NAME_MAX), name="api_tokens_name_length"),
        sa.CheckConstraint(sa.column("role").in_(ROLES), name="api_tokens_role_valid"),
        sa.Index("api_tokens_token_sha256", "token_sha256", unique=True),
    )


class RateLimitCounter(Base):
    """Hits in one fixed time window for one bucket (e.g. ``tickets:203.0.113.7``); shared by all workers."""

    __tablename__ = "rate_limit_counters"

    bucket: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    window_start: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), primary_key=True)
    hits: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)

    __table_args__ = (sa.Index("rate_limit_counters_expires_at", "expires_at"),)


class AdminSession(Base):
    """A logged-in browser: the cookie carries a random key whose SHA-256 is kept here, so logging out (or out
    everywhere), the idle timeout and the absolute lifetime end it on the server, whatever the cookie says."""

    __tablename__ = "admin_sessions"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    admin_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="CASCADE"), nullable=False)
    key_sha256: Mapped[str] = mapped_column(sa.Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())
    last_seen_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    ended_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)

    __table_args__ = (
        sa.Index("admin_sessions_key_sha256", "key_sha256", unique=True),
        sa.Index("admin_sessions_admin_id", "admin_id"),
    )


class LoginThrottle(Base):
    """Failed logins for one (normalised username, client address) pair, and until when that pair must wait."""

    __tablename__ = "login_throttles"

    bucket: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    failures: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    locked_until: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)

    __table_args__ = (sa.Index("login_throttles_expires_at", "expires_at"),)
