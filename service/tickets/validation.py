"""Checks for ticket and feedback input."""

from __future__ import annotations

import re
from typing import Any

from service.validation import ValidationError

SUBJECT_MAX = 300
BODY_MAX = 20_000
EMAIL_MAX = 254
COMMENT_MAX = 2_000
# The address as mail servers take it: a dot-atom local part and a host name of dotted labels (ASCII: an
# internationalised domain goes in its xn-- form), so markup, invisible characters and empty labels are refused.
# One pattern for Python and the OpenAPI description (ECMA regex): ASCII classes mean the same in both.
_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL_PATTERN = f"^{_ATOM}(?:\\.{_ATOM})*@(?:{_LABEL}\\.)+(?:[A-Za-z]{{2,63}}|xn--[A-Za-z0-9-]{{1,59}})$"
_EMAIL = re.compile(EMAIL_PATTERN)


def is_email(value: Any) -> bool:
    """Whether ``value`` is an email address (at most 254 characters, surrounding spaces ignored)."""
    return isinstance(value, str) and len(value) <= EMAIL_MAX and _EMAIL.fullmatch(value.strip()) is not None


def _required_text(fields: dict[str, Any], name: str, max_len: int, errors: dict[str, str]) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value.strip():
        errors[name] = "is required and must be a non-empty string"
        return ""
    if len(value.strip()) > max_len:
        errors[name] = f"must be at most {max_len} characters (got {len(value.strip())})"
    elif "\x00" in value:
        errors[name] = "must not contain NUL characters"
    return value.strip()


def clean_ticket_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``subject`` (1–300), ``body`` (1–20,000), optional ``email``."""
    errors: dict[str, str] = {name: "unknown field" for name in fields if name not in ("subject", "body", "email")}
    subject = _required_text(fields, "subject", SUBJECT_MAX, errors)
    body = _required_text(fields, "body", BODY_MAX, errors)
    email = fields.get("email")
    if email is not None:
        if not is_email(email):
            errors["email"] = "must be an email address"
        else:
            email = email.strip()
    if errors:
        raise ValidationError("invalid ticket", errors)
    return {"subject": subject, "body": body, "customer_email": email or None}


def clean_feedback_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``helpful`` (boolean) and an optional ``comment``."""
    errors: dict[str, str] = {name: "unknown field" for name in fields if name not in ("helpful", "comment")}
    helpful = fields.get("helpful")
    if not isinstance(helpful, bool):
        errors["helpful"] = "is required and must be true or false"
    comment = fields.get("comment")
    if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX or "\x00" in comment):
        errors["comment"] = f"must be a string of at most {COMMENT_MAX} characters, without NUL characters"
    if errors:
        raise ValidationError("invalid feedback", errors)
    return {"helpful": helpful, "comment": (comment or "").strip() or None}
