"""Identity verification: ``user_hash`` = HMAC-SHA256(WIDGET_IDENTITY_SECRET, user_id), made by the site's server."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from service.tickets.validation import is_email

FIELD_MAX = 200


class IdentityRefused(Exception):
    """The visitor's identity does not check out (or is required and missing)."""


@dataclass(frozen=True)
class Visitor:
    """Who is chatting: a verified user (``user_id`` set) or an anonymous visitor who may have given an e-mail."""

    user_id: str | None = None
    email: str | None = None
    name: str | None = None

    @property
    def verified(self) -> bool:
        """Whether the site's server vouched for ``user_id``."""
        return self.user_id is not None


def user_hash(secret: str, user_id: str) -> str:
    """What the site's server computes: hex HMAC-SHA256 of the user id under the shared secret."""
    return hmac.new(secret.encode(), user_id.encode(), hashlib.sha256).hexdigest()


def _text(value: Any) -> str | None:
    """A short one-line string, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if len(value) > FIELD_MAX or any(ord(ch) < 32 for ch in value):
        raise IdentityRefused("identity fields must be one line of at most 200 characters")
    return value


def verify_visitor(fields: Any, *, secret: str | None, required: bool) -> Visitor:
    """The visitor these identify-fields describe; IdentityRefused for a wrong hash, or none when one is required."""
    fields = fields if isinstance(fields, dict) else {}
    user_id, sent_hash = _text(fields.get("user_id")), _text(fields.get("user_hash"))
    email = _text(fields.get("email"))
    if email is not None and not is_email(email):
        email = None
    name = _text(fields.get("name"))
    if user_id is not None:
        if not secret or sent_hash is None:
            raise IdentityRefused("this user_id carries no valid user_hash")
        if not hmac.compare_digest(user_hash(secret, user_id), sent_hash.lower()):
            raise IdentityRefused("the user_hash does not match the user_id")
        return Visitor(user_id=user_id, email=email, name=name)
    if required:
        raise IdentityRefused("this site's chat is for signed-in users only")
    return Visitor(email=email, name=name)
