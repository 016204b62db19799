"""The transactional outbox: an e-mail is a row committed with the message it carries; a worker sends it.

This module is the data side: queueing (``enqueue_mail``), what became of each e-mail (``mail_states``), failed
mail (``failed_mail``, ``retry_failed_mail``) and the counts ``mail status`` prints. Sending is
``service.mail.delivery``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import MailOutbox, Ticket, TicketMessage
from service.mail.compose import new_message_id, new_reply_token, normalised_address, reply_address

REFERENCES_MAX = 20


class OutboxNotFound(LookupError):
    """No queued e-mail with that id."""


class NotFailed(ValueError):
    """Only a failed e-mail can be retried (a queued one is still being tried, a sent one is gone)."""


@dataclass(frozen=True)
class MailState:
    """What became of one outgoing e-mail: ``queued`` (being tried), ``sent`` or ``failed`` (given up)."""

    outbox_id: int
    status: str
    attempts: int
    error: str | None  # the last failure (for ``queued``: the last attempt's, while it is retried)
    to_address: str

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"id": self.outbox_id, "status": self.status, "attempts": self.attempts, "error": self.error,
                "to": self.to_address}


@dataclass(frozen=True)
class FailedMail:
    """A failed e-mail as the workspace, ``/admin/mail`` and ``mail status`` list it."""

    outbox_id: int
    ticket_id: int | None
    to_address: str
    subject: str
    attempts: int
    error: str | None
    failed_at: datetime


@dataclass(frozen=True)
class OutboxCounts:
    """How many e-mails wait, are being sent (leased), failed, and were sent in the last 24 hours."""

    queued: int
    sending: int
    failed: int
    sent_last_day: int


def _thread_ids(session: Session, ticket_id: int, own_id: str | None) -> tuple[str | None, list[str]]:
    """(In-Reply-To, References) for a new e-mail on the ticket: the latest message, and the chain so far."""
    rows = session.execute(sa.union_all(
        sa.select(TicketMessage.email_message_id.label("mid"), TicketMessage.created_at.label("at"))
        .where(TicketMessage.ticket_id == ticket_id, TicketMessage.email_message_id.is_not(None)),
        sa.select(MailOutbox.message_id, MailOutbox.created_at).where(MailOutbox.ticket_id == ticket_id),
    ).order_by(sa.text("at"))).all()
    chain = [mid for mid in dict.fromkeys(r.mid for r in rows) if mid != own_id]
    return (chain[-1] if chain else None), chain[-REFERENCES_MAX:]


def signed(settings: Settings, body: str) -> str:
    """The body with the brand's sign-off (``-- `` then ``Tallybook Support``) when SUPPORTRAG_BRAND_NAME is set."""
    signature = settings.brand.signature
    return f"{body.rstrip()}\n\n-- \n{signature}\n" if signature else body


def enqueue_mail(session: Session, settings: Settings, ticket: Ticket, *, subject: str, body: str,
                 message_id: str | None = None, auto_submitted: str | None = None,
                 from_name: str | None = None) -> MailOutbox | None:
    """Queue an e-mail to the ticket's customer in the caller's transaction; None without SMTP or an address.

    ``from_name`` is the display name in From (an agent's ``display_name or "Support"``); None: the brand's name
    (SUPPORTRAG_BRAND_NAME), else MAIL_FROM as set. The body is signed with the brand (``signed``).
    """
    if not settings.smtp_host or not ticket.customer_email:
        return None
    if ticket.reply_token is None:
        ticket.reply_token = new_reply_token()
    message_id = message_id or new_message_id(settings)
    in_reply_to, references = _thread_ids(session, ticket.id, message_id)
    body, from_name = signed(settings, body), from_name or settings.brand.name
    row = MailOutbox(ticket_id=ticket.id, to_address=ticket.customer_email, subject=subject, body=body,
                     message_id=message_id, in_reply_to=in_reply_to,
                     references=" ".join(references) or None, reply_to=reply_address(settings, ticket.reply_token),
                     auto_submitted=auto_submitted, from_name=from_name)
    session.add(row)
    session.flush()
    return row


def _status(row) -> str:
    return "sent" if row.sent_at else "failed" if row.failed_at else "queued"


def enqueue_notification(session: Session, settings: Settings, *, to_address: str, subject: str,
                         body: str) -> MailOutbox | None:
    """Queue an e-mail to an agent (or the team address) in the caller's transaction; None without SMTP.

    Not tied to a ticket's row (``ticket_id`` NULL) and with no reply address, so an agent answering it can never
    be taken for the customer writing on the ticket.
    """
    if not settings.smtp_host:
        return None
    batch = _open_batch(session, to_address)
    if batch is not None:  # a minute's later notifications wait in one e-mail
        count = batch.body.count(BATCH_SEPARATOR) + 2
        batch.subject = f"{count} notifications, the latest: {subject}"
        batch.body = f"{batch.body}{BATCH_SEPARATOR}{body}"
        session.flush()
        return batch
    recent = session.execute(sa.select(sa.func.count(), sa.func.max(MailOutbox.created_at)).where(
        _NOTIFICATION, MailOutbox.to_address == to_address,
        MailOutbox.created_at > sa.func.now() - sa.text(f"interval '{BATCH_SECONDS} seconds'"))).one()
    row = MailOutbox(ticket_id=None, to_address=to_address, subject=subject, body=body,
                     message_id=new_message_id(settings))
    if recent[0] >= BATCH_AFTER:  # a busy minute: this one opens the batch that goes when the minute is up
        row.next_attempt_at = recent[1] + timedelta(seconds=BATCH_SECONDS)
    session.add(row)
    session.flush()
    return row


# A notification: to an agent or the team, not about a customer's thread (no ticket, no reply address).
_NOTIFICATION = sa.and_(MailOutbox.ticket_id.is_(None), MailOutbox.reply_to.is_(None),
                        MailOutbox.auto_submitted.is_(None))
BATCH_SECONDS = 60  # a few notifications at once, then one batch, per address per minute
BATCH_AFTER = 3
BATCH_SEPARATOR = "\n\n" + "-" * 40 + "\n\n"


def _open_batch(session: Session, to_address: str) -> MailOutbox | None:
    """The address's notification still waiting for its minute (not sent, not being sent), locked."""
    return session.scalar(sa.select(MailOutbox).where(
        _NOTIFICATION, MailOutbox.to_address == to_address, MailOutbox.sent_at.is_(None),
        MailOutbox.failed_at.is_(None), MailOutbox.attempts == 0, MailOutbox.locked_until.is_(None),
        MailOutbox.next_attempt_at > sa.func.clock_timestamp())
        .order_by(MailOutbox.id.desc()).limit(1).with_for_update(skip_locked=True))


def mail_states(session: Session, ticket_id: int) -> dict[str, MailState]:
    """Message-ID → what became of that e-mail, for the ticket's outgoing e-mails."""
    rows = session.execute(sa.select(MailOutbox.id, MailOutbox.message_id, MailOutbox.sent_at, MailOutbox.failed_at,
                                     MailOutbox.attempts, MailOutbox.last_error, MailOutbox.to_address)
                           .where(MailOutbox.ticket_id == ticket_id)).all()
    return {r.message_id: MailState(r.id, _status(r), r.attempts, r.last_error, r.to_address) for r in rows}


def mail_state(session: Session, outbox_id: int) -> MailState:
    """One e-mail's state by outbox id, or OutboxNotFound."""
    row = session.get(MailOutbox, outbox_id) if 1 <= outbox_id < 2**63 else None
    if row is None:
        raise OutboxNotFound(outbox_id)
    return MailState(row.id, _status(row), row.attempts, row.last_error, row.to_address)


def _mailbox(column: sa.ColumnElement) -> sa.ColumnElement:
    """SQL for ``normalised_address``: lower case, the plus tag of the local part removed."""
    return sa.func.regexp_replace(sa.func.lower(column), r"\+[^@]*@", "@")


def recent_acknowledgements(session: Session, address: str) -> int:
    """Automatic e-mails queued to ``address``'s mailbox (case and plus tags folded) in the last hour: the relay
    limit counts these."""
    return session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
        MailOutbox.auto_submitted.is_not(None), _mailbox(MailOutbox.to_address) == normalised_address(address),
        MailOutbox.created_at > sa.func.now() - sa.text("interval '1 hour'"))) or 0


def recent_acknowledgements_to_domain(session: Session, domain: str) -> int:
    """Automatic e-mails queued to any address at ``domain`` (case folded) in the last hour."""
    return session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
        MailOutbox.auto_submitted.is_not(None),
        sa.func.split_part(sa.func.lower(MailOutbox.to_address), "@", 2) == domain.strip().lower(),
        MailOutbox.created_at > sa.func.now() - sa.text("interval '1 hour'"))) or 0


@dataclass(frozen=True)
class RetryingMail:
    """An e-mail whose last attempt failed and that will be tried again (a TLS or connection failure, a 4xx)."""

    outbox_id: int
    to_address: str
    subject: str
    attempts: int
    error: str
    next_attempt_at: datetime


def retrying_mail(session: Session, *, limit: int = 100) -> list[RetryingMail]:
    """Unsent e-mails with a failed attempt behind them, next due first: /admin/mail shows why they wait."""
    rows = session.scalars(sa.select(MailOutbox).where(
        MailOutbox.sent_at.is_(None), MailOutbox.failed_at.is_(None), MailOutbox.last_error.is_not(None),
        MailOutbox.attempts > 0)  # an admin's Retry starts again from attempt 0: no failure behind it yet
        .order_by(MailOutbox.next_attempt_at, MailOutbox.id).limit(limit)).all()
    return [RetryingMail(r.id, r.to_address, r.subject, r.attempts, r.last_error, r.next_attempt_at) for r in rows]


def failed_mail(session: Session, *, ticket_id: int | None = None, limit: int = 100) -> list[FailedMail]:
    """Failed e-mails, newest first (one ticket's, or all)."""
    where = [MailOutbox.failed_at.is_not(None)] + ([MailOutbox.ticket_id == ticket_id] if ticket_id else [])
    rows = session.scalars(sa.select(MailOutbox).where(*where)
                           .order_by(MailOutbox.failed_at.desc(), MailOutbox.id.desc()).limit(limit)).all()
    return [FailedMail(r.id, r.ticket_id, r.to_address, r.subject, r.attempts, r.last_error, r.failed_at)
            for r in rows]


def count_failed_mail(session: Session) -> int:
    """How many e-mails were given up on (and not retried since)."""
    return session.scalar(sa.select(sa.func.count()).select_from(MailOutbox)
                          .where(MailOutbox.failed_at.is_not(None))) or 0


def outbox_counts(session: Session) -> OutboxCounts:
    """The outbox at a glance, in one statement."""
    unsent = sa.and_(MailOutbox.sent_at.is_(None), MailOutbox.failed_at.is_(None))
    leased = sa.and_(unsent, MailOutbox.locked_until > sa.func.now())
    row = session.execute(sa.select(
        sa.func.count().filter(unsent, sa.or_(MailOutbox.locked_until.is_(None),
                                              MailOutbox.locked_until <= sa.func.now())).label("queued"),
        sa.func.count().filter(leased).label("sending"),
        sa.func.count().filter(MailOutbox.failed_at.is_not(None)).label("failed"),
        sa.func.count().filter(MailOutbox.sent_at > sa.func.now() - sa.text("interval '1 day'")).label("sent"),
    ).select_from(MailOutbox)).one()
    return OutboxCounts(queued=row.queued, sending=row.sending, failed=row.failed, sent_last_day=row.sent)


def retry_failed_mail(session: Session, outbox_id: int) -> None:
    """Send a failed e-mail again from the first attempt (in the caller's transaction; it commits).

    OutboxNotFound for an unknown id; NotFailed for an e-mail that is sent or still being tried.
    """
    row = session.get(MailOutbox, outbox_id, with_for_update=True) if 1 <= outbox_id < 2**63 else None
    if row is None:
        raise OutboxNotFound(outbox_id)
    if row.failed_at is None:
        raise NotFailed(f"e-mail {outbox_id} is {_status(row)}, not failed")
    row.failed_at, row.attempts, row.locked_until = None, 0, None
    row.next_attempt_at = sa.func.clock_timestamp()
    session.flush()
