"""Inbound e-mail: one RFC 5322 message becomes a follow-up on its ticket, or a new ticket, or nothing.

Matching order: the reply token in a recipient address (MAIL_REPLY_TO's plus-address), then In-Reply-To and
References against stored Message-IDs, else a new ticket that the AI answers like any other. Duplicates (a
Message-ID already stored) and automatic mail (auto-replies, bounces, bulk) create nothing. The quoted reply
text is cut with mail-parser-reply (maintained, multi-language "On … wrote:" headers and signatures).
"""

from __future__ import annotations

import email
import email.policy
import html
import re
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Callable
from email.utils import getaddresses, parseaddr

import sqlalchemy as sa
from mailparser_reply import EmailReplyParser
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import MailOutbox, Ticket, TicketMessage
from service.mail.compose import token_from_address
from service.runtime import Runtime
from service.tickets.notifications import notify_customer_reply
from service.tickets.queries import get_ticket
from service.tickets.secrets import new_ticket_secret
from service.tickets.states import CUSTOMER, apply_event
from service.tickets.thread import add_message
from service.tickets.validation import BODY_MAX, SUBJECT_MAX, is_email
from service.tickets.work import acknowledge
from service.tickets.workflow import answer_ticket

REPLY_LANGUAGES = ["en", "de", "fr", "es", "it", "nl"]
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")
_TAG = re.compile(r"<[^>]+>")
_SUBJECT_PREFIX = re.compile(r"^\s*((re|fwd?|aw|wg|sv)\s*:\s*)+", re.IGNORECASE)


@dataclass(frozen=True)
class InboundMail:
    """What matters of a parsed e-mail."""

    message_id: str | None
    sender: str | None
    recipients: list[str]
    subject: str
    text: str  # the new text, quoted reply cut
    thread_ids: list[str]  # In-Reply-To and References, newest first
    automatic: str | None  # why it is an auto-reply or bounce, else None


@dataclass(frozen=True)
class Outcome:
    """What ingesting an e-mail did: ``follow_up``, ``new_ticket``, ``duplicate``, ``ignored`` or ``rejected``."""

    action: str
    ticket_id: int | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"action": self.action, "ticket_id": self.ticket_id, "reason": self.reason}


def automatic_reason(message: EmailMessage) -> str | None:
    """Why ``message`` is automatic (RFC 3834 Auto-Submitted, X-Autoreply, bulk/list/junk, a report), or None."""
    auto = (message.get("Auto-Submitted") or "no").strip().lower()
    if auto != "no":
        return f"Auto-Submitted: {auto}"
    if message.get("X-Autoreply") or message.get("X-Autorespond"):
        return "X-Autoreply"
    if (message.get("Precedence") or "").strip().lower() in ("bulk", "junk", "list", "auto_reply"):
        return f"Precedence: {message.get('Precedence').strip().lower()}"
    if message.get_content_type() == "multipart/report":
        return "multipart/report (a delivery or read report)"
    sender = parseaddr(str(message.get("From") or ""))[1].lower()
    if sender.startswith(("mailer-daemon@", "postmaster@")) or not sender and message.get("Return-Path") == "<>":
        return "bounce"
    return None


def _text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content = part.get_content()
    if part.get_content_type() == "text/html":
        content = html.unescape(_TAG.sub(" ", re.sub(r"(?i)<br\s*/?>|</p>", "\n", content)))
    return content


def strip_quoted(text: str) -> str:
    """The new text of a reply: quoted history and the "On … wrote:" line removed."""
    cut = EmailReplyParser(languages=REPLY_LANGUAGES).parse_reply(text=text)
    return (cut if cut and cut.strip() else text).strip()


def parse_email(raw: bytes) -> InboundMail:
    """Parse raw RFC 5322 bytes."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    ids = _MESSAGE_ID.findall(str(message.get("Message-ID") or ""))
    thread = _MESSAGE_ID.findall(str(message.get("In-Reply-To") or ""))
    thread += list(reversed(_MESSAGE_ID.findall(str(message.get("References") or ""))))
    recipients = [addr for _, addr in getaddresses([str(v) for h in ("To", "Cc", "Delivered-To", "X-Original-To")
                                                    for v in message.get_all(h, [])]) if addr]
    sender = parseaddr(str(message.get("Reply-To") or message.get("From") or ""))[1] or None
    return InboundMail(message_id=ids[0] if ids else None, sender=sender, recipients=recipients,
                       subject=" ".join(str(message.get("Subject") or "").split()),
                       text=strip_quoted(_text(message)), thread_ids=list(dict.fromkeys(thread)),
                       automatic=automatic_reason(message))


def _match(session: Session, settings: Settings, mail: InboundMail) -> int | None:
    """The ticket this e-mail belongs to: by reply token, then by the Message-IDs it answers."""
    for address in mail.recipients:
        token = token_from_address(settings, address)
        if token:
            ticket_id = session.scalar(sa.select(Ticket.id).where(Ticket.reply_token == token))
            if ticket_id is not None:
                return ticket_id
    if not mail.thread_ids:
        return None
    return session.scalar(sa.union_all(
        sa.select(TicketMessage.ticket_id.label("tid")).where(TicketMessage.email_message_id.in_(mail.thread_ids)),
        sa.select(MailOutbox.ticket_id).where(MailOutbox.message_id.in_(mail.thread_ids),
                                              MailOutbox.ticket_id.is_not(None)),
    ).limit(1))


def is_duplicate(session: Session, message_id: str | None) -> bool:
    """Whether an e-mail with this Message-ID is already in a thread."""
    return message_id is not None and session.scalar(
        sa.select(sa.exists().where(TicketMessage.email_message_id == message_id))) is True


def triage(session: Session, settings: Settings, mail: InboundMail) -> Outcome:
    """Decide what to do (nothing is written): ignore, drop as duplicate, follow up on a ticket, or a new one."""
    if mail.automatic:
        return Outcome("ignored", reason=mail.automatic)
    if is_duplicate(session, mail.message_id):
        return Outcome("duplicate", reason=f"{mail.message_id} was already received")
    if not mail.text:
        return Outcome("ignored", reason="no text")
    ticket_id = _match(session, settings, mail)
    if ticket_id is not None:
        return Outcome("follow_up", ticket_id)
    if not is_email(mail.sender or ""):
        return Outcome("rejected", reason="no sender address to reply to")
    return Outcome("new_ticket")


def add_follow_up(session: Session, settings: Settings, ticket_id: int, mail: InboundMail) -> None:
    """The customer's e-mail joins the thread, and the ticket goes back to the agents' queue."""
    add_message(session, ticket_id, "customer", mail.text[:BODY_MAX], channel="email",
                email_message_id=mail.message_id)
    ticket = session.get(Ticket, ticket_id)
    apply_event(session, ticket, "customer_follow_up", CUSTOMER, first_response_hours=settings.first_response_hours)
    notify_customer_reply(session, settings, ticket, mail.text[:BODY_MAX])  # the assignee, through the outbox


def new_ticket_fields(mail: InboundMail) -> dict[str, str]:
    """Subject (without Re:/Fwd:), body and address for a ticket from an e-mail."""
    subject = _SUBJECT_PREFIX.sub("", mail.subject).strip() or mail.text.splitlines()[0]
    return {"subject": subject[:SUBJECT_MAX], "body": mail.text[:BODY_MAX], "email": mail.sender or ""}


def receive_email(runtime: Runtime, raw: bytes, *, ticket_link: Callable[[int, str], str]) -> Outcome:
    """Ingest one e-mail (commits): a follow-up, or a new ticket answered and acknowledged by e-mail.

    ``ticket_link(ticket_id, secret)`` is the customer's page for a new ticket, for the acknowledgement.
    """
    mail = parse_email(raw)
    try:
        with runtime.session() as session:
            outcome = triage(session, runtime.settings, mail)
            if outcome.action == "follow_up":
                add_follow_up(session, runtime.settings, outcome.ticket_id, mail)
        if outcome.action != "new_ticket":
            return outcome
        secret, digest = new_ticket_secret()
        ticket_id = answer_ticket(runtime, runtime.chat, new_ticket_fields(mail), secret_sha256=digest,
                                  channel="email", email_message_id=mail.message_id)
    except sa.exc.IntegrityError:  # the same Message-ID, delivered twice at once: the other copy won
        return Outcome("duplicate", reason=f"{mail.message_id} was already received")
    with runtime.session() as session:
        view = get_ticket(session, ticket_id)
        acknowledge(session, runtime.settings, ticket_id, link=ticket_link(ticket_id, secret),
                    answer=view.answer if view.status == "answered" else None)
    return Outcome("new_ticket", ticket_id)
