"""Reading one RFC 5322 message defensively: whatever the bytes hold, ``parse_email`` returns, never raises.

Headers are read as the raw strings they are (``compat32``): the modern policy parses addresses and parameters
eagerly and raises on an encoded CR/LF in ``From`` or recurses without bound on deeply nested parts. Bodies
are decoded with their declared charset, falling back to UTF-8, with replacement characters for bad bytes. A
message that cannot be parsed at all comes back with ``problem`` set, for the quarantine.
"""

from __future__ import annotations

import codecs
import email
import email.errors
import email.header
import email.policy
import html
import mimetypes
import re
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesHeaderParser
from email.utils import getaddresses

from service.mail.compose import one_line

SUBJECT_MAX_CHARS = 998
MAX_PARTS = 500  # leaf parts looked at; past that a message is a bomb, not a question
MAX_DEPTH = 50  # multipart nesting walked
FILENAME_MAX = 200
_MESSAGE_ID = re.compile(r"<[^<>\s]{1,900}>")
_TICKET_REFERENCE = re.compile(r"\[T-(\d{1,18})\]")
_TAG = re.compile(r"<[^>]*>")
_CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_UNSAFE_FILENAME = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")


@dataclass(frozen=True)
class Attachment:
    """A file carried by the message."""

    filename: str
    content_type: str
    content: bytes


@dataclass(frozen=True)
class InboundMail:
    """What matters of a parsed e-mail; ``problem`` says why it could not be read, when it could not."""

    message_id: str | None
    sender: str | None  # the From addr-spec: who wrote it (what sender matching compares)
    reply_address: str | None  # Reply-To, else From: where an answer goes
    recipients: list[str]
    cc: list[str]
    subject: str
    text: str  # the body as sent (quoted history not yet cut)
    thread_ids: list[str]  # In-Reply-To and References, newest first
    ticket_references: list[int]  # "[T-12]" in the subject
    automatic: str | None  # why it is an auto-reply or bounce, else None
    attachments: list[Attachment] = field(default_factory=list)
    problem: str | None = None


def header_text(message: Message, name: str) -> str:
    """A header's decoded text on one line ("" if absent); undecodable words are kept as sent."""
    value = message.get(name)
    if value is None:
        return ""
    raw = str(value)
    try:
        decoded = str(email.header.make_header(email.header.decode_header(raw)))
    except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
        decoded = raw
    return one_line(decoded.encode("utf-8", "replace").decode("utf-8"))


def addresses(message: Message, *names: str) -> list[str]:
    """The addr-specs in these headers, read from the raw value (encoded display names cannot inject anything)."""
    values = [one_line(str(v)) for name in names for v in (message.get_all(name) or [])]
    try:
        pairs = getaddresses(values)
    except (ValueError, IndexError):
        return []
    return [one_line(address) for _, address in pairs if address and "@" in address]


def automatic_reason(message: Message) -> str | None:
    """Why ``message`` is automatic (RFC 3834 Auto-Submitted, X-Autoreply, bulk/list/junk, a report), or None."""
    auto = header_text(message, "Auto-Submitted").lower() or "no"
    if auto != "no":
        return f"Auto-Submitted: {auto[:100]}"
    if message.get("X-Autoreply") or message.get("X-Autorespond"):
        return "X-Autoreply"
    precedence = header_text(message, "Precedence").lower()
    if precedence in ("bulk", "junk", "list", "auto_reply"):
        return f"Precedence: {precedence}"
    if message.get_content_type() == "multipart/report":
        return "multipart/report (a delivery or read report)"
    sender = (addresses(message, "From") or [""])[0].lower()
    if sender.startswith(("mailer-daemon@", "postmaster@")):
        return "bounce"
    if not sender and header_text(message, "Return-Path") == "<>":
        return "bounce"
    return None


def decode_part(part: Message) -> str:
    """A text part's content: its charset if Python knows it, else UTF-8; bad bytes become U+FFFD."""
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset() or "utf-8"
    try:
        codecs.lookup(charset)
    except (LookupError, ValueError):
        charset = "utf-8"
    return payload.decode(charset, errors="replace")


def html_to_text(content: str) -> str:
    """Visible text of an HTML body (tags dropped, entities decoded, breaks kept)."""
    return html.unescape(_TAG.sub(" ", re.sub(r"(?i)<br\s*/?>|</p>|</div>", "\n", content)))


def leaf_parts(message: Message) -> list[Message]:
    """Non-multipart parts, depth first, iteratively (a deep message cannot exhaust the stack)."""
    leaves, stack = [], [(message, 0)]
    while stack and len(leaves) < MAX_PARTS:
        part, depth = stack.pop()
        payload = part.get_payload()
        if part.is_multipart() and isinstance(payload, list):
            if depth < MAX_DEPTH:
                stack.extend((child, depth + 1) for child in reversed(payload))
        else:
            leaves.append(part)
    return leaves


def _is_attachment(part: Message) -> bool:
    disposition = str(part.get("Content-Disposition") or "").split(";")[0].strip().lower()
    return disposition == "attachment" or part.get_param("filename", header="content-disposition") is not None \
        or part.get_param("name") is not None or part.get_content_maintype() not in ("text",)


def safe_filename(part: Message, index: int, content_type: str) -> str:
    """A file name that is only a name: no path, no control characters, bounded; one is made up if absent."""
    try:
        name = part.get_filename() or ""
        name = str(email.header.make_header(email.header.decode_header(name))) if "=?" in name else name
    except (LookupError, UnicodeError, ValueError, TypeError, email.errors.HeaderParseError):
        name = ""
    name = _UNSAFE_FILENAME.sub("_", name.encode("utf-8", "replace").decode("utf-8")).strip(" ._")
    if not name:
        name = f"attachment-{index}{mimetypes.guess_extension(content_type) or '.bin'}"
    return name[-FILENAME_MAX:]


def content_type_of(part: Message) -> str:
    """The part's type, if it is a well-formed ``type/subtype``; else application/octet-stream."""
    value = part.get_content_type().lower()
    return value if _CONTENT_TYPE.fullmatch(value) else "application/octet-stream"


def body_and_attachments(message: Message) -> tuple[str, list[Attachment]]:
    """The text of the first plain (else HTML) part, and every other leaf part as an attachment."""
    leaves = leaf_parts(message)
    texts = [p for p in leaves if p.get_content_maintype() == "text" and not _is_attachment(p)]
    body_part = next((p for p in texts if p.get_content_subtype() == "plain"), texts[0] if texts else None)
    text = ""
    if body_part is not None:
        text = decode_part(body_part)
        text = html_to_text(text) if body_part.get_content_subtype() == "html" else text
    attachments = []
    for index, part in enumerate((p for p in leaves if p is not body_part and p not in texts), start=1):
        content_type = content_type_of(part)
        content = part.get_payload(decode=True)
        if isinstance(content, bytes):
            attachments.append(Attachment(safe_filename(part, index, content_type), content_type, content))
    return text.replace("\x00", ""), attachments


def message_id_of(headers: Message) -> str | None:
    """The first ``<…>`` in Message-ID, or None."""
    ids = _MESSAGE_ID.findall(str(headers.get("Message-ID") or ""))
    return ids[0] if ids else None


def read_headers(raw: bytes) -> Message:
    """Only the header block, as raw strings: never raises on what a header holds."""
    return BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)


def parse_email(raw: bytes) -> InboundMail:
    """Parse raw RFC 5322 bytes; never raises (``problem`` says what could not be read)."""
    headers = read_headers(raw)
    problem, text, attachments = None, "", []
    try:
        text, attachments = body_and_attachments(email.message_from_bytes(raw, policy=email.policy.compat32))
    except (RecursionError, LookupError, ValueError, TypeError, AttributeError, UnicodeError,
            email.errors.MessageError) as exc:
        problem = f"the MIME structure could not be read ({type(exc).__name__})"
    thread = _MESSAGE_ID.findall(str(headers.get("In-Reply-To") or ""))
    thread += list(reversed(_MESSAGE_ID.findall(str(headers.get("References") or ""))))
    subject = header_text(headers, "Subject")[:SUBJECT_MAX_CHARS]
    sender = (addresses(headers, "From") or [None])[0]
    return InboundMail(
        message_id=message_id_of(headers), sender=sender,
        reply_address=(addresses(headers, "Reply-To") or [sender])[0],
        recipients=addresses(headers, "To", "Cc", "Delivered-To", "X-Original-To"),
        cc=addresses(headers, "Cc"), subject=subject, text=text, thread_ids=list(dict.fromkeys(thread)),
        ticket_references=list(dict.fromkeys(int(n) for n in _TICKET_REFERENCE.findall(subject))),
        automatic=automatic_reason(headers), attachments=attachments, problem=problem)
