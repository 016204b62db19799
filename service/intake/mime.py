"""The body of an e-mail: every inline text part in order, attachments, forwarded messages; bounded walks only."""

from __future__ import annotations

import codecs
import email.errors
import email.header
import email.policy
import mimetypes
import re
from dataclasses import dataclass
from email.message import Message

from service.intake.headers import header_text
from service.intake.html_text import html_to_text

MAX_PARTS = 500  # leaf parts looked at; past that a message is a bomb, not a question
MAX_DEPTH = 50  # multipart nesting walked
FILENAME_MAX = 200
_CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_UNSAFE_FILENAME = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # invoice\u202egpj.exe shows as invoice.jpg


@dataclass(frozen=True)
class Attachment:
    """A file carried by the message."""

    filename: str
    content_type: str
    content: bytes


def decode_part(part: Message) -> str:
    """A text part's content: its charset if Python knows it, else UTF-8; bad bytes become U+FFFD."""
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset() or "utf-8"
    try:
        codecs.lookup(charset)
    except (LookupError, ValueError):
        charset = "utf-8"
    return payload.decode(charset, errors="replace")


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
    name = _UNSAFE_FILENAME.sub("_", _BIDI.sub("", name.encode("utf-8", "replace").decode("utf-8"))).strip(" ._")
    if not name:
        name = f"attachment-{index}{mimetypes.guess_extension(content_type) or '.bin'}"
    return name[-FILENAME_MAX:]


def content_type_of(part: Message) -> str:
    """The part's type, if it is a well-formed ``type/subtype``; else application/octet-stream."""
    value = part.get_content_type().lower()
    return value if _CONTENT_TYPE.fullmatch(value) else "application/octet-stream"


def _placeholder(part: Message, index: int) -> str:
    return f"[image: {safe_filename(part, index, content_type_of(part))}]"


def _forwarded_heading(inner: Message) -> str:
    lines = [f"{name}: {header_text(inner, name)}" for name in ("From", "Date", "Subject", "To")
             if header_text(inner, name)]
    return "\n".join(["---------- Forwarded message ----------", *lines])


def _chosen_alternative(children: list[Message]) -> Message | None:
    """The part of a multipart/alternative read as text: the plain one, else the HTML one, else the first."""
    for wanted in ("text/plain", "text/html"):
        for child in children:
            if child.get_content_type() == wanted or (child.is_multipart() and any(
                    leaf.get_content_type() == wanted for leaf in child.get_payload()[:20]
                    if isinstance(leaf, Message))):
                return child
    return children[0] if children else None


class _Body:
    """What a walk over the MIME tree collects: text segments in order, attachments, notes."""

    def __init__(self) -> None:
        self.plain: list[tuple[int, str]] = []  # (position, text)
        self.html: list[tuple[int, str]] = []
        self.other: list[tuple[int, str]] = []  # placeholders and forwarded headings
        self.attachments: list[Attachment] = []
        self.notes: list[str] = []
        self.html_parts: list[bytes] = []  # inline HTML outside an alternative: kept as a file when plain text wins
        self.position = self.leaves = 0

    def add(self, kind: list[tuple[int, str]], text: str) -> None:
        self.position += 1
        kind.append((self.position, text))

    def attach(self, part: Message, content_type: str, content: bytes, name: str | None = None) -> None:
        index = len(self.attachments) + 1
        self.attachments.append(Attachment(name or safe_filename(part, index, content_type), content_type, content))

    def text(self) -> str:
        """Plain segments (HTML ones only when there is no plain text), with placeholders, in order."""
        chosen = self.plain or self.html
        return "\n\n".join(text.strip("\n") for _, text in sorted(chosen + self.other) if text.strip())


def _leaf(body: _Body, part: Message, mode: str) -> None:
    """One leaf: text joins the body; an inline image leaves a placeholder; anything else is an attachment."""
    body.leaves += 1
    if body.leaves > MAX_PARTS:
        return
    content_type = content_type_of(part)
    if part.get_content_maintype() == "text" and not _is_attachment(part):
        if mode != "files_only":
            text = decode_part(part)
            html_part = part.get_content_subtype() == "html"
            body.add(body.html if html_part else body.plain, html_to_text(text) if html_part else text)
            if html_part:
                body.html_parts.append(text.encode("utf-8"))
        return
    content = part.get_payload(decode=True)
    if not isinstance(content, bytes):
        return
    if part.get_content_maintype() == "image" and str(part.get("Content-Disposition") or "").strip().lower()[:6] \
            != "attach" and mode == "all":
        body.add(body.other, _placeholder(part, len(body.attachments) + 1))
    body.attach(part, content_type, content)


def _forwarded(body: _Body, part: Message, mode: str) -> Message | None:
    """A message/rfc822 part: kept as an .eml attachment, its text (returned) read under a heading."""
    inner = part.get_payload(0) if isinstance(part.get_payload(), list) and part.get_payload() else None
    if not isinstance(inner, Message):
        return None
    if mode == "all":
        try:
            content = inner.as_bytes(policy=email.policy.compat32)
        except (LookupError, UnicodeError, ValueError, TypeError, IndexError):
            content = str(inner).encode("utf-8", "replace")
        body.attach(part, "message/rfc822", content, f"forwarded-{len(body.attachments) + 1}.eml")
    if mode != "files_only":
        body.add(body.other, _forwarded_heading(inner))
    return inner


def body_and_attachments(message: Message) -> tuple[str, list[Attachment], list[str]]:
    """Every inline text part joined in order (HTML only when there is no plain text), a placeholder per inline
    image, forwarded messages' text under a heading; every other leaf an attachment; notes for what was left out.

    Iterative (a deep message cannot exhaust the stack) and bounded by MAX_PARTS leaves and MAX_DEPTH levels.
    """
    body = _Body()
    stack: list[tuple[Message, int, str]] = [(message, 0, "all")]
    while stack:
        part, depth, mode = stack.pop()
        if part.get_content_type() == "message/delivery-status":  # a bounce's report: kept whole, read as automatic
            payload = part.get_payload()
            report = "\n".join(str(block) for block in payload) if isinstance(payload, list) else str(payload)
            body.attach(part, "message/delivery-status", report.encode("utf-8", "replace"), "delivery-status.txt")
            continue
        if part.get_content_type() == "message/rfc822":
            inner = _forwarded(body, part, mode)
            children = [(inner, mode)] if inner is not None else []  # its files listed too: a forwarded invoice
        elif part.is_multipart() and isinstance(part.get_payload(), list):
            payload = [child for child in part.get_payload() if isinstance(child, Message)]
            chosen = _chosen_alternative(payload) if part.get_content_type() == "multipart/alternative" else None
            children = [(child, mode if chosen is None or child is chosen else "files_only") for child in payload]
        else:
            _leaf(body, part, mode)
            continue
        if depth >= MAX_DEPTH:
            body.notes.append(f"[Not read: parts nested deeper than {MAX_DEPTH} levels]")
            continue
        stack.extend((child, depth + 1, child_mode) for child, child_mode in reversed(children))
    if body.plain:  # HTML parts beside plain text (not alternatives of it) are the customer's words too
        for content in body.html_parts:
            body.attachments.append(Attachment(f"part-{len(body.attachments) + 1}.html", "text/html", content))
    if body.leaves > MAX_PARTS:
        body.notes.append(f"[Not read: {body.leaves - MAX_PARTS} part(s) over the limit of {MAX_PARTS} per e-mail]")
    return body.text().replace("\x00", ""), body.attachments, list(dict.fromkeys(body.notes))
