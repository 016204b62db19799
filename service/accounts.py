"""Admin accounts, API tokens and the session-signing key. Use cases: they take a session, never commit."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from service.db.models import ROLES, TOKEN_NAME_MAX, AdminSession, AdminUser, ApiToken, AppState
from service.tickets.team import clean_profile
from service.validation import ValidationError

PASSWORD_MIN = 10
PASSWORD_MAX = 1024  # hashing cost grows with length; refuse absurd inputs before hashing
TOKEN_PREFIX = "srt_"
SECRET_KEY_STATE = "session_secret_key"
_USERNAME = re.compile(r"^[a-z0-9][a-z0-9._@-]{0,63}$")


class TokenNotFound(LookupError):
    """No API token with that id."""


@dataclass(frozen=True)
class Admin:
    """An admin account as the rest of the app sees it (never the hash)."""

    id: int
    username: str
    password_fingerprint: str  # changes when the password does; ends older sessions
    role: str = "admin"  # admin | agent


@dataclass(frozen=True)
class TokenInfo:
    """An API token's metadata; the secret itself is shown once, at creation."""

    id: int
    name: str
    created_at: datetime
    revoked_at: datetime | None
    role: str = "admin"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "name": self.name, "role": self.role, "created_at": self.created_at.isoformat(),
                "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None}


def hash_password(password: str) -> str:
    """A salted werkzeug hash (scrypt by default)."""
    return generate_password_hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True if ``password`` matches the stored hash."""
    return check_password_hash(password_hash, password)


@cache
def _dummy_hash() -> str:
    """Checked against when the username is unknown, so both failures take as long."""
    return hash_password(secrets.token_hex(16))


def hash_token(token: str) -> str:
    """SHA-256 hex of a token: enough for a 32-byte random secret (no salt or slow hash needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


def clean_username(username: Any) -> str:
    """Lower-cased, 1–64 of ``a-z 0-9 . _ @ -``, starting with a letter or digit."""
    value = username.strip().lower() if isinstance(username, str) else ""
    if not _USERNAME.match(value):
        raise ValidationError("invalid username", {
            "username": "use 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit"})
    return value


def check_password_rules(password: Any) -> str:
    """At least PASSWORD_MIN characters; there is no default password and no other rule."""
    if not isinstance(password, str) or not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise ValidationError("invalid password",
                              {"password": f"must be {PASSWORD_MIN} to {PASSWORD_MAX} characters"})
    return password


def _fingerprint(password_hash: str) -> str:
    return hashlib.sha256(password_hash.encode()).hexdigest()[:16]


def _admin(user: AdminUser) -> Admin:
    return Admin(id=user.id, username=user.username, password_fingerprint=_fingerprint(user.password_hash),
                 role=user.role)


def check_role(role: Any) -> str:
    """``admin`` (everything) or ``agent`` (tickets, and reading the knowledge base)."""
    if role not in ROLES:
        raise ValidationError("invalid role", {"role": f"must be one of {', '.join(ROLES)}"})
    return role


def create_admin(session: Session, username: str, password: str, *, role: str = "admin",
                 email: str | None = None, display_name: str | None = None) -> Admin:
    """Add an account (an admin unless ``role="agent"``); a taken username is a ValidationError."""
    username, password, role = clean_username(username), check_password_rules(password), check_role(role)
    if session.scalar(sa.select(AdminUser.id).where(AdminUser.username == username)) is not None:
        raise ValidationError("invalid username", {"username": f"{username!r} already exists"})
    profile = clean_profile({"email": email, "display_name": display_name})
    user = AdminUser(username=username, password_hash=hash_password(password), role=role, **profile)
    session.add(user)
    session.flush()
    return _admin(user)


def set_admin_password(session: Session, username: str, password: str) -> Admin:
    """Replace an admin's password (which also ends that admin's existing sessions)."""
    user = session.scalar(sa.select(AdminUser).where(AdminUser.username == clean_username(username)))
    if user is None:
        raise ValidationError("unknown admin", {"username": "no admin with that name"})
    user.password_hash = hash_password(check_password_rules(password))
    end_all_sessions(session, user.id)
    session.flush()
    return _admin(user)


def list_admins(session: Session) -> list[Admin]:
    """Every admin account, oldest first."""
    return [_admin(user) for user in session.scalars(sa.select(AdminUser).order_by(AdminUser.id))]


def count_admins(session: Session) -> int:
    """How many admin accounts exist."""
    return session.execute(sa.select(sa.func.count()).select_from(AdminUser)).scalar_one()


def get_admin(session: Session, admin_id: int) -> Admin | None:
    """The admin with that id, or None (e.g. deleted since the session cookie was issued)."""
    user = session.get(AdminUser, admin_id)
    return _admin(user) if user is not None else None


def user_id_for(session: Session, username: Any) -> int:
    """The account id for a username, or a ValidationError naming ``assignee``."""
    name = username.strip().lower() if isinstance(username, str) else None
    user_id = session.scalar(sa.select(AdminUser.id).where(AdminUser.username == name)) if name else None
    if user_id is None:
        raise ValidationError("invalid assignee", {"assignee": "no account with that username"})
    return user_id


def authenticate(session: Session, username: str, password: str) -> Admin | None:
    """The admin if the password matches, else None; records the login time."""
    try:
        name = clean_username(username)
    except ValidationError:
        name = None
    user = session.scalar(sa.select(AdminUser).where(AdminUser.username == name)) if name else None
    if user is None or not isinstance(password, str) or len(password) > PASSWORD_MAX:
        verify_password(_dummy_hash(), "x")
        return None
    if not verify_password(user.password_hash, password):
        return None
    user.last_login_at = sa.func.clock_timestamp()
    session.flush()
    return _admin(user)


def _token_info(token: ApiToken) -> TokenInfo:
    return TokenInfo(id=token.id, name=token.name, created_at=token.created_at, revoked_at=token.revoked_at,
                     role=token.role)


def create_token(session: Session, name: str, *, role: str = "admin") -> tuple[TokenInfo, str]:
    """Store a new token's hash; returns its metadata and the secret, which is not kept anywhere."""
    role = check_role(role)
    name = name.strip() if isinstance(name, str) else ""
    if not 1 <= len(name) <= TOKEN_NAME_MAX:
        raise ValidationError("invalid token name", {"name": f"must be 1 to {TOKEN_NAME_MAX} characters"})
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(name=name, token_sha256=hash_token(secret), role=role)
    session.add(token)
    session.flush()
    session.refresh(token, ["created_at"])
    return _token_info(token), secret


def list_tokens(session: Session) -> list[TokenInfo]:
    """Every token, revoked ones included, oldest first."""
    return [_token_info(token) for token in session.scalars(sa.select(ApiToken).order_by(ApiToken.id))]


def revoke_token(session: Session, token_id: int) -> TokenInfo:
    """Mark a token revoked (kept for the audit trail); revoking twice keeps the first time."""
    token = session.get(ApiToken, token_id) if 1 <= token_id < 2**63 else None
    if token is None:
        raise TokenNotFound(token_id)
    if token.revoked_at is None:
        token.revoked_at = sa.func.clock_timestamp()
        session.flush()
        session.refresh(token, ["revoked_at"])
    return _token_info(token)


def token_identity(session: Session, secret: str) -> TokenInfo | None:
    """The live token with that secret, or None if unknown or revoked."""
    token = session.scalar(sa.select(ApiToken).where(ApiToken.token_sha256 == hash_token(secret),
                                                     ApiToken.revoked_at.is_(None)))
    return _token_info(token) if token is not None else None


def load_secret_key(session: Session) -> str:
    """The session-signing key kept in app_state, created by whichever process asks first.

    ON CONFLICT makes concurrent first starts (several gunicorn workers) agree on one key.
    """
    session.execute(insert(AppState).values(key=SECRET_KEY_STATE, value=secrets.token_hex(32))
                    .on_conflict_do_nothing(index_elements=["key"]))
    return session.scalar(sa.select(AppState.value).where(AppState.key == SECRET_KEY_STATE))


# ---------------------------------------------------------------- server-side sessions
# A session is alive while it is not ended, younger than its absolute lifetime, and used within the idle timeout;
# each use moves the idle clock. A deleted admin's sessions go with it (ON DELETE CASCADE).
TOUCH_SESSION_SQL = sa.text("""
UPDATE admin_sessions AS s SET last_seen_at = clock_timestamp()
FROM admin_users AS u
WHERE s.key_sha256 = :key_sha256 AND u.id = s.admin_id AND s.ended_at IS NULL
  AND s.expires_at > clock_timestamp() AND s.last_seen_at > clock_timestamp() - make_interval(secs => :idle)
RETURNING u.id, u.username, u.password_hash, u.role
""")
# Ended or expired sessions are kept a day (who was logged in when), then deleted at the next login.
SWEEP_SESSIONS_SQL = sa.text("""
DELETE FROM admin_sessions
WHERE coalesce(ended_at, expires_at) < clock_timestamp() - interval '1 day'
""")


def start_session(session: Session, admin: Admin, *, lifetime_seconds: int) -> str:
    """Store a new session for ``admin``; returns its key (for the cookie), of which only the SHA-256 is kept."""
    session.execute(SWEEP_SESSIONS_SQL)
    key = secrets.token_urlsafe(32)
    now = sa.func.clock_timestamp()  # now() is the transaction's start
    session.add(AdminSession(admin_id=admin.id, key_sha256=hash_token(key), created_at=now, last_seen_at=now,
                             expires_at=now + timedelta(seconds=lifetime_seconds)))
    session.flush()
    return key


def session_admin(session: Session, key: str, *, idle_seconds: int) -> Admin | None:
    """The admin of a live session (and its idle clock restarted), or None if ended, idle or expired."""
    row = session.execute(TOUCH_SESSION_SQL, {"key_sha256": hash_token(key), "idle": idle_seconds}).one_or_none()
    if row is None:
        return None
    return Admin(id=row.id, username=row.username, password_fingerprint=_fingerprint(row.password_hash),
                 role=row.role)


def end_session(session: Session, key: str) -> None:
    """Log one session out (its cookie stops working everywhere, copies included)."""
    session.execute(sa.update(AdminSession).where(AdminSession.key_sha256 == hash_token(key),
                                                  AdminSession.ended_at.is_(None))
                    .values(ended_at=sa.func.clock_timestamp()))


def end_all_sessions(session: Session, admin_id: int) -> int:
    """Log an admin out everywhere; returns how many sessions were still open."""
    return session.execute(sa.update(AdminSession).where(AdminSession.admin_id == admin_id,
                                                         AdminSession.ended_at.is_(None))
                           .values(ended_at=sa.func.clock_timestamp())).rowcount
