"""Sending the outbox: claim one due e-mail with a lease, talk SMTP outside any transaction, then record.

Each e-mail is isolated: whatever building or sending it raises is recorded on its row (``attempts``,
``last_error``) and the pass moves on. A 5xx for the recipient or an invalid address fails it at once
(``failed_at``); a temporary error is retried with exponential backoff until ``MAIL_MAX_ATTEMPTS``.

Several workers may send at once: a claim is ``FOR UPDATE SKIP LOCKED`` plus a lease (``locked_until``), so no
two workers hold the same e-mail. Delivery stays at-least-once in two places: the process dies (or the
database goes away) after the SMTP server accepted the message and before it is marked sent, or a send outlives
its lease (``MAIL_LEASE_SECONDS``) and another worker claims it; either way it is sent again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Callable, ContextManager

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import MailOutbox, TicketAttachment, TicketMessage
from service.mail.compose import FilePart, build_email
from service.mail.transport import Failure, Transport, classify_failure

log = logging.getLogger(__name__)
BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS = 15, 3600
ERROR_MAX_CHARS = 500
SENT_ACKNOWLEDGEMENT = "(sent; the text is not kept because it carried the ticket's secret link)"
Sessions = Callable[[], ContextManager[Session]]

# The next due e-mail nobody holds: not sent, not failed, its lease (if any) run out.
CLAIM = sa.text("""
UPDATE mail_outbox SET locked_until = clock_timestamp() + make_interval(secs => :lease)
WHERE id = (
    SELECT id FROM mail_outbox
    WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= clock_timestamp()
      AND (locked_until IS NULL OR locked_until <= clock_timestamp())
    ORDER BY next_attempt_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING id
""")


@dataclass(frozen=True)
class Delivery:
    """One worker pass: e-mails sent, failed attempts (to be retried) and e-mails given up on."""

    sent: int
    failed: int
    gave_up: int = 0


@dataclass(frozen=True)
class Claimed:
    """An e-mail a worker holds the lease on, read whole so that sending needs no transaction."""

    outbox_id: int
    attempts: int
    auto_submitted: str | None
    message: EmailMessage | None  # None: it could not even be built (``error`` says why)
    error: BaseException | None


def backoff_seconds(attempts: int) -> int:
    """Seconds before retry number ``attempts`` (15 s, 30 s, 60 s … at most an hour)."""
    return min(BACKOFF_BASE_SECONDS * 2 ** max(attempts - 1, 0), BACKOFF_MAX_SECONDS)


def retry_span_seconds(max_attempts: int) -> int:
    """How long an e-mail that always fails temporarily is retried before it is failed."""
    return sum(backoff_seconds(n) for n in range(1, max_attempts))


def _files(session: Session, message_id: str) -> list[FilePart]:
    """The files of the thread message this e-mail carries (an agent's reply with attachments)."""
    rows = session.execute(sa.select(TicketAttachment.filename, TicketAttachment.content_type,
                                     TicketAttachment.content)
                           .join(TicketMessage, TicketMessage.id == TicketAttachment.message_id)
                           .where(TicketMessage.email_message_id == message_id)
                           .order_by(TicketAttachment.id)).all()
    return [FilePart(r.filename, r.content_type, r.content) for r in rows]


def _build(session: Session, settings: Settings, row: MailOutbox) -> EmailMessage:
    date: datetime = row.created_at
    return build_email(sender=settings.mail_from, to=row.to_address, subject=row.subject, body=row.body,
                       message_id=row.message_id, reply_to=row.reply_to, in_reply_to=row.in_reply_to,
                       references=row.references, auto_submitted=row.auto_submitted, from_name=row.from_name,
                       date=date, files=_files(session, row.message_id))


def claim_next(sessions: Sessions, settings: Settings) -> Claimed | None:
    """Lease the next due e-mail and read it (one short transaction); None when nothing is due."""
    with sessions() as session:
        outbox_id = session.scalar(CLAIM, {"lease": settings.mail_lease_seconds})
        if outbox_id is None:
            return None
        row = session.get(MailOutbox, outbox_id)
        try:
            message, error = _build(session, settings, row), None
        except Exception as exc:  # noqa: BLE001 - a row that cannot be built is recorded, never stops the pass
            message, error = None, exc
        return Claimed(outbox_id, row.attempts, row.auto_submitted, message, error)


def _record_sent(session: Session, claimed: Claimed) -> None:
    values = {"sent_at": sa.func.clock_timestamp(), "last_error": None, "locked_until": None}
    if claimed.auto_submitted:  # the acknowledgement carried the ticket's secret link: not kept once delivered
        values["body"] = SENT_ACKNOWLEDGEMENT
    session.execute(sa.update(MailOutbox).where(MailOutbox.id == claimed.outbox_id).values(**values))


def _record_failure(session: Session, settings: Settings, claimed: Claimed, failure: Failure) -> bool:
    """Store the failure; True when the e-mail is given up on (permanent, or out of attempts)."""
    attempts = claimed.attempts + 1
    give_up = failure.permanent or attempts >= settings.mail_max_attempts
    values = {"attempts": attempts, "last_error": failure.reason[:ERROR_MAX_CHARS], "locked_until": None}
    if give_up:
        values["failed_at"] = sa.func.clock_timestamp()
    else:
        values["next_attempt_at"] = sa.func.clock_timestamp() + sa.func.make_interval(
            0, 0, 0, 0, 0, 0, backoff_seconds(attempts))
    session.execute(sa.update(MailOutbox).where(MailOutbox.id == claimed.outbox_id,
                                                MailOutbox.sent_at.is_(None)).values(**values))
    return give_up


def deliver_one(sessions: Sessions, settings: Settings, transport: Transport) -> str | None:
    """Claim, send and record one e-mail: ``sent``, ``failed`` (retried later), ``gave_up``; None if none due."""
    claimed = claim_next(sessions, settings)
    if claimed is None:
        return None
    error = claimed.error
    if error is None:
        try:
            transport.send(claimed.message)
        except Exception as exc:  # noqa: BLE001 - whatever one e-mail raises is recorded on its row
            error = exc
    with sessions() as session:
        if error is None:
            _record_sent(session, claimed)
            return "sent"
        failure = classify_failure(error)
        gave_up = _record_failure(session, settings, claimed, failure)
    log.warning("sending e-mail %s failed (attempt %s%s): %s", claimed.outbox_id, claimed.attempts + 1,
                ", given up" if gave_up else "", failure.reason)
    return "gave_up" if gave_up else "failed"


def deliver_due_mail(sessions: Sessions, settings: Settings, transport: Transport, *, limit: int = 50,
                     stopping: Callable[[], bool] = lambda: False) -> Delivery:
    """Send up to ``limit`` due e-mails (``sessions``: a context-manager factory that commits); once ``stopping()``
    says so, no further e-mail is claimed (the one being sent is finished and recorded first)."""
    outcomes: list[str] = []
    for _ in range(limit):
        if stopping():
            break
        outcome = deliver_one(sessions, settings, transport)
        if outcome is None:
            break
        outcomes.append(outcome)
    return Delivery(sent=outcomes.count("sent"), failed=outcomes.count("failed"), gave_up=outcomes.count("gave_up"))
