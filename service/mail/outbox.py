"""The transactional outbox: an e-mail is a row committed with the message it carries; a worker sends it.

``deliver_due_mail`` sends each due row inside the transaction that holds its row lock (SKIP LOCKED), so two
workers never send the same row; a failure is recorded and retried with exponential backoff. A crash between
the SMTP server accepting a message and the commit would send it again: delivery is at-least-once at the
protocol level, exactly once whenever the process survives.
"""

from __future__ import annotations

import logging
import smtplib
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import formataddr, parseaddr
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import MailOutbox, Ticket, TicketMessage
from service.mail.compose import build_email, new_message_id, new_reply_token, reply_address

log = logging.getLogger(__name__)
BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS = 15, 3600
REFERENCES_MAX = 20
MAIL_LOCK_KEY = 0x5375_7070_6D61_696C  # pg advisory lock: one sending worker per deployment
SENT_ACKNOWLEDGEMENT = "(sent; the text is not kept because it carried the ticket's secret link)"


class Transport(Protocol):
    """Something that hands an e-mail to a mail server, or raises."""

    def send(self, message: EmailMessage) -> None:
        """Send or raise."""


class SmtpTransport:
    """SMTP with the SMTP_* settings (STARTTLS and login when configured)."""

    def __init__(self, settings: Settings, timeout: float = 15.0) -> None:
        self.settings, self.timeout = settings, timeout

    def send(self, message: EmailMessage) -> None:
        """Open a connection, send, close."""
        s = self.settings
        with smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=self.timeout) as smtp:
            if s.smtp_starttls:
                smtp.starttls()
            if s.smtp_username:
                smtp.login(s.smtp_username, s.smtp_password or "")
            smtp.send_message(message)


@dataclass(frozen=True)
class Delivery:
    """One worker pass: how many e-mails went out and how many failed (to be retried)."""

    sent: int
    failed: int


def backoff_seconds(attempts: int) -> int:
    """Seconds before retry number ``attempts`` (15 s, 30 s, 60 s … at most an hour)."""
    return min(BACKOFF_BASE_SECONDS * 2 ** max(attempts - 1, 0), BACKOFF_MAX_SECONDS)


def _thread_ids(session: Session, ticket_id: int, own_id: str | None) -> tuple[str | None, list[str]]:
    """(In-Reply-To, References) for a new e-mail on the ticket: the latest message, and the chain so far."""
    rows = session.execute(sa.union_all(
        sa.select(TicketMessage.email_message_id.label("mid"), TicketMessage.created_at.label("at"))
        .where(TicketMessage.ticket_id == ticket_id, TicketMessage.email_message_id.is_not(None)),
        sa.select(MailOutbox.message_id, MailOutbox.created_at).where(MailOutbox.ticket_id == ticket_id),
    ).order_by(sa.text("at"))).all()
    chain = [mid for mid in dict.fromkeys(r.mid for r in rows) if mid != own_id]
    return (chain[-1] if chain else None), chain[-REFERENCES_MAX:]


def enqueue_mail(session: Session, settings: Settings, ticket: Ticket, *, subject: str, body: str,
                 message_id: str | None = None, auto_submitted: str | None = None,
                 from_name: str | None = None) -> MailOutbox | None:
    """Queue an e-mail to the ticket's customer in the caller's transaction; None without SMTP or an address.

    ``from_name``: the display name in From (an agent's); MAIL_FROM's own name otherwise.
    """
    if not settings.smtp_host or not ticket.customer_email:
        return None
    if ticket.reply_token is None:
        ticket.reply_token = new_reply_token()
    message_id = message_id or new_message_id(settings)
    in_reply_to, references = _thread_ids(session, ticket.id, message_id)
    row = MailOutbox(ticket_id=ticket.id, to_address=ticket.customer_email, subject=subject, body=body,
                     message_id=message_id, in_reply_to=in_reply_to,
                     references=" ".join(references) or None, reply_to=reply_address(settings, ticket.reply_token),
                     auto_submitted=auto_submitted, from_name=from_name)
    session.add(row)
    session.flush()
    return row


def enqueue_notification(session: Session, settings: Settings, *, to_address: str, subject: str,
                         body: str) -> MailOutbox | None:
    """Queue an e-mail to an agent (or the team address) in the caller's transaction; None without SMTP.

    Not tied to a ticket's row (``ticket_id`` NULL) and with no reply address, so an agent answering it can never
    be taken for the customer writing on the ticket.
    """
    if not settings.smtp_host:
        return None
    row = MailOutbox(ticket_id=None, to_address=to_address, subject=subject, body=body,
                     message_id=new_message_id(settings))
    session.add(row)
    session.flush()
    return row


def sender(settings: Settings, from_name: str | None) -> str:
    """MAIL_FROM, with ``from_name`` as its display name when one is given."""
    if not from_name:
        return settings.mail_from
    return formataddr((from_name, parseaddr(settings.mail_from)[1]))


def _email(settings: Settings, row: MailOutbox) -> EmailMessage:
    return build_email(sender=sender(settings, row.from_name), to=row.to_address, subject=row.subject, body=row.body,
                       message_id=row.message_id, reply_to=row.reply_to, in_reply_to=row.in_reply_to,
                       references=row.references, auto_submitted=row.auto_submitted)


DUE = (sa.select(MailOutbox)
       .where(MailOutbox.sent_at.is_(None), MailOutbox.next_attempt_at <= sa.func.clock_timestamp())
       .order_by(MailOutbox.next_attempt_at, MailOutbox.id).limit(1).with_for_update(skip_locked=True))


def _deliver_one(session: Session, settings: Settings, transport: Transport) -> bool | None:
    """Send the next due e-mail; True sent, False failed, None nothing due (or another worker is sending)."""
    if not session.scalar(sa.select(sa.func.pg_try_advisory_xact_lock(MAIL_LOCK_KEY))):
        return None
    row = session.scalar(DUE)
    if row is None:
        return None
    try:
        transport.send(_email(settings, row))
    except (OSError, smtplib.SMTPException) as exc:
        row.attempts += 1
        row.last_error = f"{type(exc).__name__}: {exc}"[:500]
        row.next_attempt_at = sa.func.clock_timestamp() + sa.func.make_interval(
            0, 0, 0, 0, 0, 0, backoff_seconds(row.attempts))
        log.warning("sending e-mail %s failed (attempt %s): %s", row.id, row.attempts, row.last_error)
        return False
    row.sent_at, row.last_error = sa.func.clock_timestamp(), None
    if row.auto_submitted:  # the acknowledgement carried the ticket's secret link: do not keep it once delivered
        row.body = SENT_ACKNOWLEDGEMENT
    return True


def deliver_due_mail(sessions, settings: Settings, transport: Transport, *, limit: int = 50) -> Delivery:
    """Send due e-mails one transaction each (``sessions``: a context-manager factory that commits)."""
    sent = failed = 0
    for _ in range(limit):
        with sessions() as session:
            outcome = _deliver_one(session, settings, transport)
        if outcome is None:
            break
        sent, failed = sent + (outcome is True), failed + (outcome is False)
    return Delivery(sent=sent, failed=failed)


@dataclass(frozen=True)
class FailedMail:
    """An outgoing e-mail given up on (``failed_at`` set), as /admin/mail lists it."""

    id: int
    ticket_id: int | None
    to_address: str
    subject: str
    attempts: int
    last_error: str | None
    failed_at: datetime


def failed_mail(session: Session, *, limit: int = 100) -> list[FailedMail]:
    """Outgoing e-mails given up on, newest first."""
    rows = session.scalars(sa.select(MailOutbox).where(MailOutbox.failed_at.is_not(None))
                           .order_by(MailOutbox.failed_at.desc(), MailOutbox.id.desc()).limit(limit)).all()
    return [FailedMail(r.id, r.ticket_id, r.to_address, r.subject, r.attempts, r.last_error, r.failed_at)
            for r in rows]


def retry_failed_mail(session: Session, outbox_id: int) -> None:
    """Queue a failed e-mail again, due now (minimal version by mail-in; mail-out owns the outbox's failure states).

    LookupError if there is no failed e-mail with that id.
    """
    row = session.get(MailOutbox, outbox_id, with_for_update=True)
    if row is None or row.failed_at is None or row.sent_at is not None:
        raise LookupError(f"no failed e-mail {outbox_id}")
    row.failed_at, row.locked_until, row.next_attempt_at = None, None, sa.func.now()
