"""Inbound e-mail is stored before it is interpreted: raw bytes (capped by INBOUND_RAW_MAX_BYTES), SHA-256,
and a dedupe key (the Message-ID, else the content hash), so a parser bug quarantines a message, never loses it,
and a relay's retry or a webhook replay is stored once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import InboundEmail
from service.intake.headers import addresses, header_text, raw_headers
from service.intake.parse import message_id_of, read_headers
from service.intake.senders import strict_mailbox

REASON_MAX_CHARS = 500
MAX_ATTEMPTS = 3  # a message whose handling never finished (a killed worker) is quarantined on the next try
OPEN_STATUSES = ("received", "quarantined")


@dataclass(frozen=True)
class Stored:
    """The row an e-mail is stored as; ``new`` is False when this copy was already stored."""

    id: int
    new: bool
    status: str
    ticket_id: int | None


@dataclass(frozen=True)
class InboundView:
    """A stored e-mail as /admin/mail lists it."""

    id: int
    received_at: datetime
    sender: str | None
    subject: str | None
    status: str
    reason: str | None
    attempts: int
    size: int
    ticket_id: int | None


def dedupe_key(message_id: str | None, sha256: str) -> str:
    """The Message-ID when there is one, else ``sha256:<hex>`` of the raw bytes."""
    return message_id or f"sha256:{sha256}"


def _storable(text: str | None) -> str | None:
    """Header text as a PostgreSQL text column takes it: a NUL (which it refuses) becomes U+FFFD."""
    return None if text is None else text.replace("\x00", "\ufffd")


def inbound_key(raw: bytes) -> str:
    """The key a stored copy of ``raw`` is found by (its Message-ID, else its content hash)."""
    return dedupe_key(_header_fields(raw)[0], hashlib.sha256(raw).hexdigest())


def _header_fields(raw: bytes) -> tuple[str | None, dict]:
    """The Message-ID, and the sender, subject and Cc shown on /admin/mail: never raises, so the bytes are always
    stored (whatever a header holds, the quarantine shows the message instead of losing it)."""
    try:
        headers = read_headers(raw)
        return _storable(message_id_of(headers)), dict(
            sender=_storable(strict_mailbox(raw_headers(headers, "From"))),  # None unless exactly one mailbox
            subject=_storable(header_text(headers, "Subject")[:300]),
            cc=[_storable(address) for address in addresses(headers, "Cc")[:50]])
    except Exception:  # noqa: BLE001 - storing comes first; parse_email says what was wrong
        return None, dict(sender=None, subject=None, cc=[])


def store_inbound(session: Session, raw: bytes, *, raw_max_bytes: int, size: int | None = None) -> Stored:
    """Store ``raw`` once (in the caller's transaction); a copy already stored comes back with ``new`` False.

    ``size``: the whole message's, when only its first bytes were read (a capped pipe or IMAP read).
    """
    digest = hashlib.sha256(raw).hexdigest()
    message_id, fields = _header_fields(raw)
    size = max(size or 0, len(raw))
    values = dict(dedupe_key=dedupe_key(message_id, digest), message_id=message_id, sha256=digest, size=size,
                  raw=raw[:raw_max_bytes], raw_truncated=size > raw_max_bytes, **fields)
    stored = _insert_once(session, values)
    if stored.new or message_id is None or stored.sha256 == digest:
        return stored.stored
    # Another message under a Message-ID already taken (a sender's bug, or a forgery): not a replay of it, so it
    # is kept under its own key, which its own replays then find.
    return _insert_once(session, values | {"dedupe_key": f"{message_id} sha256:{digest}"}).stored


@dataclass(frozen=True)
class _Inserted:
    stored: Stored
    sha256: str

    @property
    def new(self) -> bool:
        return self.stored.new


def _insert_once(session: Session, values: dict) -> _Inserted:
    """Insert unless the dedupe key is taken; the row under the key either way, with its content hash."""
    new_id = session.scalar(insert(InboundEmail).values(**values)
                            .on_conflict_do_nothing(index_elements=["dedupe_key"]).returning(InboundEmail.id))
    row = session.execute(sa.select(InboundEmail.id, InboundEmail.status, InboundEmail.ticket_id, InboundEmail.sha256)
                          .where(InboundEmail.dedupe_key == values["dedupe_key"])).one()
    return _Inserted(Stored(row.id, new_id is not None, row.status, row.ticket_id), row.sha256)


def set_outcome(row: InboundEmail, status: str, *, reason: str | None = None, ticket_id: int | None = None,
                related_ticket_id: int | None = None) -> None:
    """Record what became of a stored e-mail."""
    row.status, row.reason = status, (reason or None) and reason[:REASON_MAX_CHARS]
    row.ticket_id, row.related_ticket_id = ticket_id, related_ticket_id
    row.processed_at = sa.func.now()


def open_inbound(session: Session, *, limit: int = 100) -> list[InboundView]:
    """Quarantined e-mails and any stored but not yet handled, oldest first: what an admin must look at."""
    rows = session.scalars(sa.select(InboundEmail).where(InboundEmail.status.in_(OPEN_STATUSES))
                           .order_by(InboundEmail.id).limit(limit)).all()
    return [InboundView(r.id, r.received_at, r.sender, r.subject, r.status, r.reason, r.attempts, r.size,
                        r.ticket_id) for r in rows]


def automatic_inbound(session: Session, *, limit: int = 20) -> list[InboundView]:
    """The latest automatic e-mails (auto-replies, bounces, lists): stored and shown, never answered."""
    rows = session.scalars(sa.select(InboundEmail).where(InboundEmail.status == "ignored")
                           .order_by(InboundEmail.id.desc()).limit(limit)).all()
    return [InboundView(r.id, r.received_at, r.sender, r.subject, r.status, r.reason, r.attempts, r.size,
                        r.ticket_id) for r in rows]


def inbound_counts(session: Session) -> dict[str, int]:
    """How many stored e-mails are in each status."""
    rows = session.execute(sa.select(InboundEmail.status, sa.func.count()).group_by(InboundEmail.status)).all()
    return {status: count for status, count in rows}


def discard_inbound(session: Session, inbound_id: int) -> None:
    """An admin drops a quarantined e-mail (kept, marked discarded); LookupError if it is not in quarantine."""
    row = session.get(InboundEmail, inbound_id, with_for_update=True)
    if row is None or row.status not in OPEN_STATUSES:
        raise LookupError(f"no quarantined e-mail {inbound_id}")
    set_outcome(row, "discarded", reason=row.reason)


def reopen_inbound(session: Session, inbound_id: int) -> None:
    """Put a quarantined e-mail back to ``received`` so that it is handled again; LookupError if not open."""
    row = session.get(InboundEmail, inbound_id, with_for_update=True)
    if row is None or row.status not in OPEN_STATUSES:
        raise LookupError(f"no quarantined e-mail {inbound_id}")
    row.status = "received"
    row.attempts = min(row.attempts, MAX_ATTEMPTS - 1)  # an admin's Retry is one more attempt, not a fresh count
