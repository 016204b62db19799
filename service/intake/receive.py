"""Receiving one e-mail: store it first, then turn it into a follow-up, a new ticket, or a quarantine entry.

The stored row is locked while its outcome is written, in the same transaction as the ticket or follow-up it
makes, so the same message delivered twice (a relay's retry, a webhook replay, an IMAP re-fetch) has one effect.
Only the AI's answer and the acknowledgement come after that commit, as for any ticket.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, replace
from email.utils import parseaddr
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.locks import lock_customer_address
from service.db.models import InboundEmail, Ticket, TicketMessage
from service.intake.match import Match, match_ticket
from service.intake.parse import Attachment, InboundMail, parse_email
from service.intake.quoted import split_quoted, strip_quoted
from service.intake.store import MAX_ATTEMPTS, set_outcome, store_inbound
from service.mail.compose import token_from_address
from service.runtime import Runtime
from service.tickets.attachments import add_attachment
from service.tickets.queries import get_ticket
from service.tickets.secrets import new_ticket_secret
from service.tickets.notifications import notify_customer_reply
from service.tickets.states import CUSTOMER, apply_event
from service.tickets.thread import add_message
from service.tickets.validation import BODY_MAX, EMAIL_MAX, SUBJECT_MAX, ValidationError, clean_ticket_fields
from service.tickets.work import acknowledge
from service.tickets.workflow import finish_ticket

log = logging.getLogger(__name__)
_SUBJECT_PREFIX = re.compile(r"^\s*((re|fwd?|aw|wg|sv)\s*:\s*)+", re.IGNORECASE)
TicketLink = Callable[[int, str], str]


@dataclass(frozen=True)
class Outcome:
    """What receiving an e-mail did: ``follow_up``, ``new_ticket``, ``duplicate``, ``ignored`` or ``quarantined``."""

    action: str
    ticket_id: int | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"action": self.action, "ticket_id": self.ticket_id, "reason": self.reason}


@dataclass(frozen=True)
class NewTicket:
    """A ticket stored from an e-mail, still to be answered and acknowledged."""

    ticket_id: int
    secret: str
    subject: str
    body: str


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def kept_attachments(attachments: list[Attachment], settings: Settings) -> tuple[list[Attachment], list[str]]:
    """The files within the per-file and per-message caps, and a note for each one left out."""
    kept, notes, total = [], [], 0
    for item in attachments:
        size = len(item.content)
        if size > settings.inbound_attachment_max_bytes:
            notes.append(f"[Not kept: {item.filename} ({_megabytes(size)}), over the "
                         f"{_megabytes(settings.inbound_attachment_max_bytes)} limit per file]")
        elif total + size > settings.inbound_message_attachments_max_bytes:
            notes.append(f"[Not kept: {item.filename} ({_megabytes(size)}), over the "
                         f"{_megabytes(settings.inbound_message_attachments_max_bytes)} limit per message]")
        else:
            kept.append(item)
            total += size
    return kept, notes


FULL_TEXT_FILENAME = "full-message.txt"


def message_text(mail: InboundMail, *, follow_up: bool = False) -> str:
    """The customer's words. Quoted history is cut only from a follow-up matched to a ticket (the history is
    already in its thread): in a new ticket, a forwarded invoice or a "De:" line is the question, not history."""
    return strip_quoted(mail.text) if follow_up else mail.text.replace("\r\n", "\n").strip()


def with_full_text(text: str, kept: list[Attachment], notes: list[str]) -> tuple[list[Attachment], list[str]]:
    """A text longer than a ticket's body also goes in whole as a file, so that every word reaches the ticket."""
    if len(text) <= BODY_MAX:
        return kept, notes
    whole = Attachment(FULL_TEXT_FILENAME, "text/plain", text.encode("utf-8"))
    return [*kept, whole], [*notes, f"[The message is longer than {BODY_MAX:,} characters: all of it is attached "
                                     f"as {FULL_TEXT_FILENAME}]"]


def message_body(mail: InboundMail, kept: list[Attachment], notes: list[str], *, follow_up: bool = False) -> str:
    """The text of the e-mail, with a line for attachment-only mail and any file left out (the notes are kept
    whole: a long text is what gets cut)."""
    text = message_text(mail, follow_up=follow_up)
    if not text and kept:
        text = "(attachments only: " + ", ".join(a.filename for a in kept) + ")"
    tail = "\n\n".join(part for part in (*mail.notes, *notes) if part)
    room = BODY_MAX - (len(tail) + 2 if tail else 0)
    return "\n\n".join(part for part in (text[:max(room, 0)], tail) if part)[:BODY_MAX]


def _add_files(session: Session, message_id: int, kept: list[Attachment]) -> None:
    for item in kept:
        add_attachment(session, message_id, filename=item.filename, content_type=item.content_type,
                       content=item.content)


def _follow_up(session: Session, settings: Settings, row: InboundEmail, mail: InboundMail, match: Match,
               body: str, kept: list[Attachment]) -> Outcome:
    message = add_message(session, match.ticket_id, "customer", body, channel="email",
                          email_message_id=mail.message_id)
    _add_files(session, message.id, kept)
    ticket = session.get(Ticket, match.ticket_id)
    apply_event(session, ticket, "customer_follow_up", CUSTOMER, first_response_hours=settings.first_response_hours)
    notify_customer_reply(session, settings, ticket, body)  # the assignee, through the outbox
    set_outcome(row, "processed", reason=f"follow-up by {match.how}", ticket_id=match.ticket_id)
    return Outcome("follow_up", match.ticket_id)


def _new_ticket(session: Session, row: InboundEmail, mail: InboundMail, match: Match, body: str,
                kept: list[Attachment]) -> tuple[Outcome, NewTicket]:
    subject = _SUBJECT_PREFIX.sub("", mail.subject).strip() or body.splitlines()[0]
    cleaned = clean_ticket_fields({"subject": subject[:SUBJECT_MAX], "body": body})
    # The one From mailbox (SMTPUTF8 local parts included), never a Reply-To: automatic mail goes nowhere else.
    cleaned["customer_email"] = mail.sender if mail.sender and len(mail.sender) <= EMAIL_MAX else None
    secret, digest = new_ticket_secret()
    ticket = Ticket(**cleaned, status="received", secret_sha256=digest, ack_pending=True)  # owed with the ticket
    session.add(ticket)
    session.flush()
    message = add_message(session, ticket.id, "customer", cleaned["body"], channel="email",
                          email_message_id=mail.message_id)
    _add_files(session, message.id, kept)
    reason = ""
    if cleaned["customer_email"] is None:
        reason = "unknown sender: From is not exactly one mailbox"
        add_message(session, ticket.id, "internal_note", f"Unknown sender: the From header ({mail.raw_from!r}) "
                    "does not name exactly one mailbox, so this e-mail joins no thread and nobody is mailed. "
                    "The raw message is on /admin/mail.", channel="email")
    if match.ticket_id is not None:  # it named another customer's ticket: linked, never added to it
        reason = f"sender does not match T-{match.ticket_id}"
        add_message(session, ticket.id, "internal_note", f"Sender does not match T-{match.ticket_id}: this e-mail "
                    f"from {mail.sender} named T-{match.ticket_id} (by {match.how}), whose thread it was not "
                    "added to. It is a ticket of its own.", channel="email")
    set_outcome(row, "processed", reason=reason or "new ticket", ticket_id=ticket.id,
                related_ticket_id=match.ticket_id)
    return Outcome("new_ticket", ticket.id, reason), NewTicket(ticket.id, secret, cleaned["subject"], cleaned["body"])


def _already_in_a_thread(session: Session, message_id: str | None) -> bool:
    return message_id is not None and session.scalar(
        sa.select(sa.exists().where(TicketMessage.email_message_id == message_id))) is True


def without_nul(mail: InboundMail) -> InboundMail:
    """Its Message-IDs with NUL (which PostgreSQL text refuses) as U+FFFD, as they are stored, before matching:
    one such byte must not quarantine the message."""
    def clean(value: str | None) -> str | None:
        return None if value is None else value.replace("\x00", "\ufffd")

    return replace(mail, message_id=clean(mail.message_id), thread_ids=[clean(t) for t in mail.thread_ids])


def decide(session: Session, settings: Settings, row: InboundEmail,
           mail: InboundMail) -> tuple[Outcome, NewTicket | None]:
    """Write the e-mail's outcome (in the caller's transaction, which holds the row's lock)."""
    mail = without_nul(mail)
    if mail.problem:
        return quarantine(row, mail.problem), None
    automatic = mail.automatic or _our_loop(settings, mail)
    if automatic:
        set_outcome(row, "ignored", reason=automatic)
        return Outcome("ignored", reason=automatic), None
    if _already_in_a_thread(session, mail.message_id):
        set_outcome(row, "duplicate", reason=f"{mail.message_id} is already in a thread")
        return Outcome("duplicate", reason=f"{mail.message_id} was already received"), None
    kept, notes = kept_attachments(mail.attachments, settings)
    if not message_body(mail, kept, notes):
        return quarantine(row, "no text and no attachment"), None
    lock_customer_address(session, mail.reply_address)  # an erasure of this sender waits, or is waited for
    match = match_ticket(session, settings, mail)
    if match.follow_up:
        kept, notes = with_full_text(message_text(mail, follow_up=True), kept, notes)
        body = message_body(mail, kept, notes, follow_up=True)
        history = split_quoted(mail.text)[1]
        if history:  # kept, as a file agents open when they need it (collapsed, out of the thread's way)
            kept = [*kept, Attachment("quoted-history.txt", "text/plain", history.encode("utf-8"))]
        return _follow_up(session, settings, row, mail, match, body, kept), None
    kept, notes = with_full_text(message_text(mail), kept, notes)
    body = message_body(mail, kept, notes)
    try:
        with session.begin_nested():
            return _new_ticket(session, row, mail, match, body, kept)
    except ValidationError as exc:
        return quarantine(row, f"not a valid ticket: {exc.details or exc}"), None


def _our_loop(settings: Settings, mail: InboundMail) -> str | None:
    """"X-Loop: <our address>": a message we sent (or a loop through a forwarder) came back."""
    ours = {address.casefold() for address in (_address_of(settings.mail_from), _address_of(settings.mail_reply_to))
            if address}
    looped = [address for address in mail.loop_addresses if address.casefold() in ours
              or token_from_address(settings, address)]
    return f"X-Loop: {looped[0]} (our own address)" if looped else None


def _address_of(value: str | None) -> str:
    return parseaddr(value or "")[1].replace("{token}", "")


def quarantine(row: InboundEmail, reason: str) -> Outcome:
    """Keep the e-mail for an admin (/admin/mail: retry, discard)."""
    set_outcome(row, "quarantined", reason=reason)
    return Outcome("quarantined", reason=reason)


def _begin_attempt(runtime: Runtime, inbound_id: int) -> Outcome | None:
    """Count this attempt and commit it before any parsing, so a message that kills its worker is given up on after
    MAX_ATTEMPTS (quarantined, never parsed again by killing another); an outcome when there is nothing to parse."""
    with runtime.session() as session:
        row = session.get(InboundEmail, inbound_id, with_for_update=True, populate_existing=True)
        if row.status != "received":
            return Outcome("duplicate", row.ticket_id, f"already received (e-mail #{row.id}: {row.status})")
        if row.raw_truncated:  # never parse half a message
            return quarantine(row, f"larger than INBOUND_RAW_MAX_BYTES ({row.size} bytes): stored truncated")
        if row.attempts >= MAX_ATTEMPTS:
            return quarantine(row, f"gave up after {row.attempts} attempts that did not finish (a worker was killed "
                                   "or timed out while reading it)")
        row.attempts += 1
    return None


def _record(runtime: Runtime, inbound_id: int, raw: bytes | None) -> tuple[Outcome, NewTicket | None]:
    """Parse the stored message, then lock its row and write its outcome unless another delivery already did."""
    stopped = _begin_attempt(runtime, inbound_id)
    if stopped is not None:
        return stopped, None
    if raw is None:
        with runtime.session() as session:
            raw = session.scalar(sa.select(InboundEmail.raw).where(InboundEmail.id == inbound_id))
    mail = parse_email(raw)
    with runtime.session() as session:
        row = session.get(InboundEmail, inbound_id, with_for_update=True, populate_existing=True)
        if row.status != "received":
            return Outcome("duplicate", row.ticket_id, f"already received (e-mail #{row.id}: {row.status})"), None
        return decide(session, runtime.settings, row, mail)


def _quarantine_after_error(runtime: Runtime, inbound_id: int, exc: Exception) -> Outcome:
    log.exception("inbound e-mail #%s could not be handled; quarantined", inbound_id)
    with runtime.session() as session:
        row = session.get(InboundEmail, inbound_id, with_for_update=True, populate_existing=True)
        return quarantine(row, f"internal error: {type(exc).__name__}: {exc}")


def handle_stored(runtime: Runtime, inbound_id: int, *, ticket_link: TicketLink, raw: bytes | None = None) -> Outcome:
    """Handle a stored e-mail: its outcome recorded, then a new ticket answered and acknowledged.

    A database error propagates (the caller answers "try again": the row is still ``received``); any other
    error quarantines the message.
    """
    try:
        outcome, new = _record(runtime, inbound_id, raw)
    except (sa.exc.OperationalError, sa.exc.InterfaceError):  # the database is down: deliver again later
        raise
    except Exception as exc:  # noqa: BLE001 - a parser or use-case bug must not lose the e-mail
        return _quarantine_after_error(runtime, inbound_id, exc)
    if new is not None:
        finish_ticket(runtime, runtime.chat, new.ticket_id, new.subject, new.body, started=time.perf_counter())
        _acknowledge(runtime, new, ticket_link)
    return outcome


def _acknowledge(runtime: Runtime, new: NewTicket, ticket_link: TicketLink) -> None:
    try:
        with runtime.session() as session:
            view = get_ticket(session, new.ticket_id)
            acknowledge(session, runtime.settings, new.ticket_id, link=ticket_link(new.ticket_id, new.secret),
                        answer=view.answer if view.status == "answered" else None)
    except Exception:  # noqa: BLE001 - the ticket is stored and answered; the customer still has the thread
        log.exception("no acknowledgement for e-mail ticket %s", new.ticket_id)


def receive_email(runtime: Runtime, raw: bytes, *, ticket_link: TicketLink, size: int | None = None) -> Outcome:
    """Store one e-mail, then handle it (idempotent: the same message again is a ``duplicate``).

    ``ticket_link(ticket_id, secret)`` is the customer's page of a new ticket, for the acknowledgement. Raises
    ``sqlalchemy.exc.OperationalError`` only when the database is unavailable (nothing, or only the raw
    message, was stored: deliver it again later); anything else ends as an outcome.
    """
    with runtime.session() as session:
        stored = store_inbound(session, raw, raw_max_bytes=runtime.settings.inbound_raw_max_bytes, size=size)
    if stored.status != "received":
        return Outcome("duplicate", stored.ticket_id, f"already received (e-mail #{stored.id}: {stored.status})")
    return handle_stored(runtime, stored.id, ticket_link=ticket_link, raw=raw)
