"""Files on a ticket's thread messages (``ticket_attachments``): stored with their size and SHA-256, listed
with the messages, and read back for a download by someone who may see the ticket."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, undefer

from service.db.models import TicketAttachment, TicketMessage
from service.tickets.thread import PUBLIC_KINDS

ON_MESSAGE = TicketMessage.id == TicketAttachment.message_id


@dataclass(frozen=True)
class AttachmentView:
    """An attachment as the thread lists it (the content is read only for a download)."""

    id: int
    message_id: int
    filename: str
    content_type: str
    size: int
    sha256: str

    def to_dict(self, url: str) -> dict[str, Any]:
        """JSON-ready form with the download URL."""
        return {"id": self.id, "filename": self.filename, "size": self.size, "content_type": self.content_type,
                "sha256": self.sha256, "url": url}


def add_attachment(session: Session, message_id: int, *, filename: str, content_type: str,
                   content: bytes) -> TicketAttachment:
    """Store one file on a thread message (in the caller's transaction)."""
    row = TicketAttachment(message_id=message_id, filename=filename, content_type=content_type, size=len(content),
                           sha256=hashlib.sha256(content).hexdigest(), content=content)
    session.add(row)
    return row


def _view(row: TicketAttachment) -> AttachmentView:
    return AttachmentView(row.id, row.message_id, row.filename, row.content_type, row.size, row.sha256)


def attachments_by_message(session: Session, ticket_id: int) -> dict[int, list[AttachmentView]]:
    """Message id → its attachments, for one ticket's thread (one query; contents not loaded)."""
    rows = session.scalars(sa.select(TicketAttachment).join(TicketMessage, ON_MESSAGE)
                           .where(TicketMessage.ticket_id == ticket_id).order_by(TicketAttachment.id)).all()
    found: dict[int, list[AttachmentView]] = {}
    for row in rows:
        found.setdefault(row.message_id, []).append(_view(row))
    return found


def attachment_content(session: Session, ticket_id: int, attachment_id: int, *,
                       public_only: bool) -> tuple[AttachmentView, bytes]:
    """One attachment of the ticket and its bytes; LookupError if it is not on this ticket (or, for the
    customer, ``public_only``, it is on an internal note)."""
    where = [TicketAttachment.id == attachment_id, TicketMessage.ticket_id == ticket_id]
    if public_only:
        where.append(TicketMessage.kind.in_(PUBLIC_KINDS))
    row = session.scalar(sa.select(TicketAttachment).join(TicketMessage, ON_MESSAGE).where(*where)
                         .options(undefer(TicketAttachment.content)))
    if row is None:
        raise LookupError(f"attachment {attachment_id} not found on ticket {ticket_id}")
    return _view(row), row.content
