"""Building outgoing e-mails safely: one-line headers, stored Message-IDs, reply addresses with a token, a Date,
the sender's display name, and attached files as MIME parts."""

from __future__ import annotations

import email
import email.header
import email.policy
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from email.errors import HeaderParseError, MessageError
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr

from service.config import Settings

_LINE_BREAKS = re.compile(r"[\r\n\x00\x0b\x0c\x1c-\x1f\x85\u2028\u2029]+")
TOKEN_PATTERN = "[A-Za-z0-9_-]{16,64}"
_ADDR_SPEC = re.compile(r"[^@\s<>(),;:\\\"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# RFC 5322 msg-id with dot-atom halves; no "=?" (the modern policy would decode an encoded word inside it).
_MSG_ID = re.compile(r"<[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
                     r"@[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*>")
DECODE_ROUNDS = 5
HEADER_MAX_CHARS = 2000  # a header value is cut there first: decode_header is quadratic in encoded words
_MIME_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")


class InvalidAddress(ValueError):
    """An address no mail server could deliver to: sending it can never succeed."""


class UnsafeHeader(InvalidAddress):
    """A header value that would have written another header line: never sent (a permanent failure)."""


@dataclass(frozen=True)
class FilePart:
    """A file to attach: its name, MIME type and bytes."""

    filename: str
    content_type: str
    content: bytes


def one_line(value: str) -> str:
    """A header value with no way to start another header: line breaks become spaces."""
    return _LINE_BREAKS.sub(" ", value).strip()


def _decoded_words(value: str) -> str:
    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (LookupError, UnicodeError, ValueError, HeaderParseError):
        return value


def header_safe(value: str) -> str:
    """A customer's value as a header takes it: encoded words decoded first, then every control character (CR, LF,
    NUL …) made a space; an encoded word still left after that is broken up, so no policy can decode it again.

    On Python before 3.11.10/3.12.5, ``EmailMessage`` decodes ``=?utf-8?q?…=0D=0A…?=`` in a value and writes the
    CR LF out verbatim (CVE-2024-6923): cleaning the raw string alone lets that through.
    """
    value = value[:HEADER_MAX_CHARS]
    for _ in range(DECODE_ROUNDS):
        decoded = _decoded_words(value) if "=?" in value else value
        if decoded == value:
            break
        value = decoded
    return _CONTROLS.sub(" ", value).replace("=?", "= ?").strip()


def message_ids(value: str | None) -> list[str]:
    """The well-formed ``<id@domain>`` Message-IDs in ``value``: only these go into In-Reply-To and References."""
    return [token for token in (value or "").split() if _MSG_ID.fullmatch(token) and "=?" not in token]


def normalised_address(address: str) -> str:
    """The mailbox a person reads: case folded, a plus tag removed (``Bob+x@Example.com`` → ``bob@example.com``)."""
    local, _, domain = address.strip().lower().rpartition("@")
    return f"{local.partition('+')[0]}@{domain}"


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


def checked_address(address: str) -> str:
    """``address`` as one addr-spec, or InvalidAddress (no display name, no list, no line break)."""
    value = address.strip()
    local, at, domain = value.rpartition("@")
    try:  # an internationalised domain travels as its xn-- form; a UTF-8 local part needs SMTPUTF8 (smtplib asks)
        value = f"{local}{at}{domain.encode('idna').decode('ascii')}" if at and not domain.isascii() else value
    except UnicodeError as exc:
        raise InvalidAddress(f"not a deliverable address: {value[:200]!r}") from exc
    if not _ADDR_SPEC.fullmatch(value) or "=?" in value:
        raise InvalidAddress(f"not a deliverable address: {value[:200]!r}")
    return value


def sender_header(mail_from: str, from_name: str | None) -> str | Address:
    """MAIL_FROM as configured, or its address under ``from_name`` (an agent's display name, quoted safely)."""
    if not from_name:
        return one_line(mail_from)
    try:
        return Address(display_name=header_safe(from_name), addr_spec=parseaddr(one_line(mail_from))[1])
    except (HeaderParseError, ValueError, IndexError):  # a MAIL_FROM without a plain address: keep it as set
        return one_line(mail_from)


def attach_files(message: EmailMessage, files: list[FilePart]) -> None:
    """Each file as an ``attachment`` part (the body becomes the first part of a multipart/mixed)."""
    for part in files:
        kind = part.content_type.lower() if _MIME_TYPE.fullmatch(part.content_type.lower()) else ""
        maintype, _, subtype = (kind or "application/octet-stream").partition("/")
        message.add_attachment(part.content, maintype=maintype, subtype=subtype, filename=header_safe(part.filename))


def build_email(*, sender: str, to: str, subject: str, body: str, message_id: str, reply_to: str | None = None,
                in_reply_to: str | None = None, references: str | None = None,
                auto_submitted: str | None = None, from_name: str | None = None, date: datetime | None = None,
                files: list[FilePart] | None = None) -> EmailMessage:
    """A plain-text e-mail (files attached); every header value is cleaned after decoding (``header_safe``), only
    well-formed Message-IDs thread it, and the result is checked to hold exactly the headers set here.

    ``date`` is when the message was queued (RFC 5322: when it was ready to send), kept the same on every retry.
    """
    message = EmailMessage()
    message["From"] = sender_header(sender, from_name)
    message["To"] = checked_address(header_safe(to))
    message["Subject"] = header_safe(subject)
    message["Date"] = format_datetime(date) if date is not None else format_datetime(datetime.now().astimezone())
    message["Message-ID"] = (message_ids(message_id) or [one_line(message_id)])[0]
    if reply_to:
        message["Reply-To"] = checked_address(header_safe(reply_to))
    for name, value in (("In-Reply-To", message_ids(in_reply_to)[:1]), ("References", message_ids(references))):
        if value:
            message[name] = " ".join(value)
    if auto_submitted:  # RFC 3834: the acknowledgement is automatic, so auto-responders do not answer it
        message["Auto-Submitted"] = header_safe(auto_submitted)
    message.set_content(body)
    attach_files(message, files or [])
    check_headers(message)
    return message


def check_headers(message: EmailMessage) -> None:
    """UnsafeHeader unless the serialised message, read back, has exactly the header lines set (the last guard)."""
    try:
        wire = message.as_bytes(policy=email.policy.SMTPUTF8)
        sent = [name.lower() for name in email.message_from_bytes(wire, policy=email.policy.compat32).keys()]
    except (MessageError, UnicodeError, ValueError, TypeError, LookupError) as exc:
        raise UnsafeHeader(f"the e-mail cannot be written safely: {type(exc).__name__}") from exc
    if sorted(sent) != sorted(name.lower() for name in message.keys()):
        raise UnsafeHeader("a header value would have written another header line; not sent")
