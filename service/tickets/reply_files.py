"""Files an agent attaches to a reply: checked against the size caps, stored in ``ticket_attachments``.

The API takes them as JSON (``attachments: [{filename, content_type?, content_base64}]``), the workspace as a
multipart upload; both become ``FilePart`` values before anything is stored. The outbox sends them as MIME parts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Sequence

from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import TicketAttachment
from service.mail.compose import FilePart
from service.validation import ValidationError

FILENAME_MAX = 255
FILE_FIELDS = ("filename", "content_type", "content_base64")
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]+")
_CONTENT_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")


def safe_filename(name: str) -> str:
    """The last path component, without control characters, at most 255 characters ("attachment" if empty)."""
    cleaned = _UNSAFE_NAME.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return cleaned[:FILENAME_MAX] or "attachment"


def safe_content_type(content_type: str | None) -> str:
    """A well-formed ``type/subtype`` (parameters dropped), else ``application/octet-stream``."""
    value = (content_type or "").split(";", 1)[0].strip().lower()
    return value if _CONTENT_TYPE.fullmatch(value) else "application/octet-stream"


def _decode(index: int, item: Any) -> FilePart:
    errors: dict[str, str] = {}
    if not isinstance(item, dict):
        raise ValidationError("invalid attachment", {f"attachments[{index}]": "must be an object"})
    errors |= {f"attachments[{index}].{k}": "unknown field" for k in item if k not in FILE_FIELDS}
    name, kind, data = item.get("filename"), item.get("content_type"), item.get("content_base64")
    if not isinstance(name, str) or not name.strip() or len(name) > FILENAME_MAX:
        errors[f"attachments[{index}].filename"] = f"is required: 1 to {FILENAME_MAX} characters"
    if kind is not None and not isinstance(kind, str):
        errors[f"attachments[{index}].content_type"] = "must be a string such as application/pdf"
    content = b""
    try:
        content = base64.b64decode(data, validate=True) if isinstance(data, str) else None
    except (binascii.Error, ValueError):
        content = None
    if content is None:
        errors[f"attachments[{index}].content_base64"] = "is required: the file's bytes in standard base64"
    if errors:
        raise ValidationError("invalid attachment", errors)
    return FilePart(safe_filename(name), safe_content_type(kind), content)


def decode_attachments(value: Any) -> list[FilePart]:
    """The JSON ``attachments`` field (absent or null: none)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError("invalid attachments", {"attachments": "must be a list of files"})
    return [_decode(index, item) for index, item in enumerate(value)]


def check_attachments(settings: Settings, files: Sequence[FilePart]) -> None:
    """Refuse too many files, an empty or too big file, or too many bytes in all (REPLY_ATTACHMENT* settings)."""
    errors: dict[str, str] = {}
    if len(files) > settings.reply_attachments_max_files:
        errors["attachments"] = f"at most {settings.reply_attachments_max_files} files"
    for index, part in enumerate(files):
        if not part.content or len(part.content) > settings.reply_attachment_max_bytes:
            errors[f"attachments[{index}]"] = (f"{part.filename}: 1 to {settings.reply_attachment_max_bytes} "
                                               "bytes (REPLY_ATTACHMENT_MAX_BYTES)")
    if sum(len(part.content) for part in files) > settings.reply_attachments_max_bytes:
        errors.setdefault("attachments", f"at most {settings.reply_attachments_max_bytes} bytes in all "
                                         "(REPLY_ATTACHMENTS_MAX_BYTES)")
    if errors:
        raise ValidationError("invalid attachments", errors)


def store_attachments(session: Session, message_id: int, files: Sequence[FilePart]) -> list[TicketAttachment]:
    """Keep the files with the thread message, with their size and SHA-256."""
    rows = [TicketAttachment(message_id=message_id, filename=part.filename, content_type=part.content_type,
                             size=len(part.content), sha256=hashlib.sha256(part.content).hexdigest(),
                             content=part.content) for part in files]
    session.add_all(rows)
    session.flush()
    return rows
