"""Agents as their team sees them: the name customers see (never the login name), where notifications go.

Use cases: they take a session and never commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AdminUser
from service.tickets.validation import is_email
from service.validation import ValidationError

DISPLAY_NAME_MAX = 80
DEFAULT_DISPLAY_NAME = "Support"


def display_name(name: str | None) -> str:
    """What a customer sees for an agent: their display name, else "Support" (never the username)."""
    return name or DEFAULT_DISPLAY_NAME


@dataclass(frozen=True)
class Profile:
    """What an agent may change about themself: the name customers see, where notifications go, and whether."""

    id: int
    username: str
    role: str
    display_name: str | None
    email: str | None
    notify_by_email: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"username": self.username, "role": self.role, "display_name": self.display_name,
                "email": self.email, "notify_by_email": self.notify_by_email}


def clean_profile(fields: dict[str, Any]) -> dict[str, Any]:
    """``display_name`` (1-80 characters, one line, or empty: "Support"), ``email``, ``notify_by_email`` (bool)."""
    errors, cleaned = {}, {}
    if "display_name" in fields:
        name = fields["display_name"]
        name = name.strip() if isinstance(name, str) else name
        if name is not None and (not isinstance(name, str) or len(name) > DISPLAY_NAME_MAX
                                 or any(c in name for c in "\r\n\x00<>")):
            errors["display_name"] = f"must be one line of at most {DISPLAY_NAME_MAX} characters, without < or >"
        cleaned["display_name"] = name or None
    if "email" in fields:
        email = fields["email"].strip() if isinstance(fields["email"], str) else fields["email"]
        if email and not is_email(email):
            errors["email"] = "must be an e-mail address"
        cleaned["email"] = email or None
    if "notify_by_email" in fields:
        if not isinstance(fields["notify_by_email"], bool):
            errors["notify_by_email"] = "must be true or false"
        cleaned["notify_by_email"] = fields["notify_by_email"]
    if errors:
        raise ValidationError("invalid profile", errors)
    return cleaned


def _profile(user: AdminUser) -> Profile:
    return Profile(user.id, user.username, user.role, user.display_name, user.email, user.notify_by_email)


def get_profile(session: Session, username: str) -> Profile:
    """An account's profile, or a ValidationError naming ``username``."""
    user = session.scalar(sa.select(AdminUser).where(AdminUser.username == username.strip().lower()))
    if user is None:
        raise ValidationError("unknown account", {"username": "no account with that name"})
    return _profile(user)


def update_profile(session: Session, username: str, fields: dict[str, Any]) -> Profile:
    """Change display name, e-mail and the notification switch (only the fields given)."""
    user = session.scalar(sa.select(AdminUser).where(AdminUser.username == username.strip().lower()))
    if user is None:
        raise ValidationError("unknown account", {"username": "no account with that name"})
    for name, value in clean_profile(fields).items():
        setattr(user, name, value)
    session.flush()
    return _profile(user)


def list_profiles(session: Session) -> list[Profile]:
    """Every account's profile, by username."""
    return [_profile(user) for user in session.scalars(sa.select(AdminUser).order_by(AdminUser.username))]
