"""Building outgoing e-mails safely: one-line headers, stored Message-IDs, reply addresses with a token."""

from __future__ import annotations

import re
import secrets
from email.message import EmailMessage
from email.utils import make_msgid

from service.config import Settings

_LINE_BREAKS = re.compile(r"[\r\n\x00\x0b\x0c\x1c-\x1f\x85\u2028\u2029]+")
TOKEN_PATTERN = "[A-Za-z0-9_-]{16,64}"


def one_line(value: str) -> str:
    """A header value with no way to start another header: line breaks become spaces."""
    return _LINE_BREAKS.sub(" ", value).strip()


def mail_domain(settings: Settings) -> str:
    """The domain of MAIL_FROM, for Message-IDs."""
    return settings.mail_from.rpartition("@")[2].strip("> ") or "localhost"


def new_message_id(settings: Settings) -> str:
    """A fresh ``<…@domain>`` Message-ID."""
    return make_msgid(idstring=secrets.token_hex(4), domain=mail_domain(settings))


def new_reply_token() -> str:
    """A ticket's plus-address token: unguessable, and safe in the local part of an address."""
    return secrets.token_urlsafe(18)


def reply_address(settings: Settings, token: str | None) -> str | None:
    """MAIL_REPLY_TO with the ticket's token, e.g. ``support+abc@example.com``; None if unset."""
    if settings.mail_reply_to is None or token is None:
        return None
    return settings.mail_reply_to.replace("{token}", token)


def token_from_address(settings: Settings, address: str) -> str | None:
    """The token in a recipient address that matches MAIL_REPLY_TO, else None."""
    if settings.mail_reply_to is None:
        return None
    before, _, after = settings.mail_reply_to.partition("{token}")
    match = re.fullmatch(re.escape(before) + f"({TOKEN_PATTERN})" + re.escape(after), address.strip(), re.IGNORECASE)
    return match.group(1) if match else None


def build_email(*, sender: str, to: str, subject: str, body: str, message_id: str, reply_to: str | None = None,
                in_reply_to: str | None = None, references: str | None = None,
                auto_submitted: str | None = None) -> EmailMessage:
    """A plain-text e-mail; every header value is made one line first (no header injection)."""
    message = EmailMessage()
    message["From"] = one_line(sender)
    message["To"] = one_line(to)
    message["Subject"] = one_line(subject)
    message["Message-ID"] = one_line(message_id)
    if reply_to:
        message["Reply-To"] = one_line(reply_to)
    if in_reply_to:
        message["In-Reply-To"] = one_line(in_reply_to)
    if references:
        message["References"] = one_line(references)
    if auto_submitted:  # RFC 3834: the acknowledgement is automatic, so auto-responders do not answer it
        message["Auto-Submitted"] = one_line(auto_submitted)
    message.set_content(body)
    return message
