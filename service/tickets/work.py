"""Agents working tickets: assignment, replies and notes, and the e-mails they send (the queues: tickets.desk).

Use cases: they take a session and never commit. A reply and its e-mail (the outbox row) are added in the
caller's transaction, so they commit together or not at all. Whatever changes a ticket's state or adds a reply
first locks its row (``SELECT … FOR UPDATE``), so racing agents and customers take turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import WORK_STATES, AdminUser, InboundEmail, Ticket, TicketMessage
from service.knowledge.articles import BIGINT_MAX
from service.links import ticket_link
from service.mail.compose import FilePart, new_message_id
from service.mail.outbox import (enqueue_mail, mail_states, recent_acknowledgements,
                                 recent_acknowledgements_to_domain)
from service.tickets.composer import clear_composer
from service.tickets.drafts import edit_ratio, latest_draft, mark_drafts_used
from service.tickets.queries import TicketNotFound, TicketView, ticket_views
from service.tickets.ratings import rating_invitation
from service.tickets.reply_files import check_attachments, decode_attachments, store_attachments
from service.tickets.notifications import notify_unassigned
from service.tickets.states import SYSTEM, Actor, apply_event
from service.tickets.team import display_name
from service.tickets.thread import MessageView, add_message, message_view
from service.tickets.validation import BODY_MAX
from service.validation import ValidationError

REPLY_FIELDS = ("body", "internal", "status", "attachments")
SUPPRESSED_NOTE = ("No e-mail went to the customer (too many acknowledgements to this address in the last hour), "
                   "so the AI's answer was never sent: please reply.")


@dataclass(frozen=True)
class WorkItem:
    """A ticket in a queue: the ticket, who has it, and when a first response is due."""

    ticket: TicketView
    assignee: str | None
    opened_at: datetime | None
    due_at: datetime | None
    overdue: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for agents)."""
        return {**self.ticket.to_dict(), "assignee": self.assignee,
                "opened_at": self.opened_at.isoformat() if self.opened_at else None,
                "due_at": self.due_at.isoformat() if self.due_at else None, "overdue": self.overdue}


@dataclass(frozen=True)
class Reply:
    """What sending a reply did: the stored message, and whether an e-mail is queued for it."""

    message: MessageView
    email: str  # "queued" | "none" (no SMTP or no customer address)
    state: str | None
    attachments: int = 0  # files stored with the message


def work_ticket(session: Session, ticket_id: int, *, lock: bool = False) -> Ticket:
    """The ticket row, or TicketNotFound; ``lock``: row-locked until the transaction ends, and read afresh."""
    options = {"with_for_update": True, "populate_existing": True} if lock else {}
    ticket = session.get(Ticket, ticket_id, **options) if 1 <= ticket_id <= BIGINT_MAX else None
    if ticket is None:
        raise TicketNotFound(ticket_id)
    return ticket


def work_item(session: Session, ticket_id: int) -> WorkItem:
    """One ticket with its work fields."""
    ticket = work_ticket(session, ticket_id)
    name = session.scalar(sa.select(AdminUser.username).where(AdminUser.id == ticket.assignee_id)) \
        if ticket.assignee_id else None
    overdue = ticket.state == "open" and session.scalar(sa.select(sa.literal(ticket.due_at) < sa.func.now())) \
        if ticket.due_at else False
    return WorkItem(ticket_views(session, [ticket])[0], name, ticket.opened_at, ticket.due_at, bool(overdue))


def assign_ticket(session: Session, ticket_id: int, assignee_id: int | None) -> WorkItem:
    """Give the ticket to an agent (None: unassign)."""
    ticket = work_ticket(session, ticket_id, lock=True)
    if assignee_id is not None and session.get(AdminUser, assignee_id) is None:
        raise ValidationError("invalid assignee", {"assignee_id": "no such account"})
    ticket.assignee_id = assignee_id
    session.flush()
    return work_item(session, ticket_id)


def clean_reply(fields: dict[str, Any]) -> tuple[str, bool, str | None]:
    """``body`` (1–20,000), ``internal`` (bool, default false), ``status`` (open|pending|solved, optional)."""
    errors = {name: "unknown field" for name in fields if name not in REPLY_FIELDS}
    body, internal, status = fields.get("body"), fields.get("internal", False), fields.get("status")
    if not isinstance(body, str) or not body.strip() or len(body.strip()) > BODY_MAX or "\x00" in body:
        errors["body"] = f"is required: 1 to {BODY_MAX} characters, without NUL"
    if not isinstance(internal, bool):
        errors["internal"] = "must be true or false"
    if status is not None and status not in WORK_STATES:
        errors["status"] = f"must be one of {', '.join(WORK_STATES)}"
    if errors:
        raise ValidationError("invalid reply", errors)
    return body.strip(), internal, status


def reply_subject(ticket: Ticket, reference: str) -> str:
    """``Re: <subject> [T-12]``: the reference helps a person, the headers thread it."""
    return f"Re: {ticket.subject} [{reference}]"


def ticket_page_url(settings: Settings, ticket_id: int) -> str:
    """The customer's ticket page: absolute, with a signed token that opens it on any device (no cookie)."""
    return ticket_link(settings, ticket_id)


def agent_display_name(session: Session, user_id: int | None) -> str:
    """The name customers see for an agent: their display name, or "Support" (never the login name)."""
    name = session.scalar(sa.select(AdminUser.display_name).where(AdminUser.id == user_id)) if user_id else None
    return display_name((name or "").strip() or None)


def reply_email_body(settings: Settings, ticket_id: int, body: str) -> str:
    """The reply as e-mailed: the agent's text, then the ticket's reference and page."""
    return f"{body}\n\n--\nYour ticket T-{ticket_id}: {ticket_page_url(settings, ticket_id)}\n"


def _note(session: Session, settings: Settings, ticket: Ticket, body: str, status: str | None, agent: Actor,
          channel: str, files: Sequence[FilePart]) -> Reply:
    message = add_message(session, ticket.id, "internal_note", body, channel=channel, author_user_id=agent.user_id)
    store_attachments(session, message.id, files)
    if status is not None and status != ticket.state:
        apply_event(session, ticket, "agent_set_state", agent, requested=status,
                    first_response_hours=settings.first_response_hours)
    return Reply(message_view(session, message.id), "none", ticket.state, len(files))


def send_reply(session: Session, settings: Settings, ticket_id: int, fields: dict[str, Any], *, agent: Actor,
               channel: str = "web", files: Sequence[FilePart] = ()) -> Reply:
    """Store a reply (queued for e-mail with it, files attached) or an internal note, then move the ticket's state.

    A public reply defaults to ``pending`` (waiting on the customer); a note leaves the state unless asked.
    ``files`` are uploads already read (the workspace form); the API sends ``attachments`` in ``fields``.
    """
    body, internal, status = clean_reply(fields)
    files = [*decode_attachments(fields.get("attachments")), *files]
    check_attachments(settings, files)
    ticket = work_ticket(session, ticket_id, lock=True)
    if internal:
        return _note(session, settings, ticket, body, status, agent, channel, files)
    draft = latest_draft(session, ticket.id)
    message_id = new_message_id(settings)
    message = add_message(session, ticket.id, "agent_reply", body, channel=channel, author_user_id=agent.user_id,
                          email_message_id=message_id, draft_body=draft.body if draft else None,
                          draft_article_ids=list(draft.article_ids) if draft else None,
                          edit_ratio=edit_ratio(draft.body, body) if draft and draft.body else None)
    store_attachments(session, message.id, files)
    mark_drafts_used(session, ticket.id, message.id)
    clear_composer(session, ticket.id, agent.user_id)  # sent: nothing unsent is left to restore
    if ticket.first_response_at is None:  # read under the row lock: set once, by the first reply to commit
        ticket.first_response_at = message.created_at
    mail_body = body + rating_invitation(settings, ticket) if status == "solved" else body  # CSAT (issue 25)
    outbox = enqueue_mail(session, settings, ticket, subject=reply_subject(ticket, f"T-{ticket.id}"),
                          body=reply_email_body(settings, ticket.id, mail_body), message_id=message_id,
                          from_name=agent_display_name(session, agent.user_id))
    apply_event(session, ticket, "agent_reply", agent, requested=status or "pending",
                first_response_hours=settings.first_response_hours)
    session.flush()
    return Reply(message_view(session, message.id), "queued" if outbox else "none", ticket.state, len(files))


def _owed_acknowledgement(session: Session, ticket: Ticket) -> bool:
    """Only a ticket handed to an agent, or one that came in by e-mail, with an address, is acknowledged."""
    if not ticket.customer_email:
        return False
    by_email = session.scalar(sa.select(TicketMessage.channel).where(TicketMessage.ticket_id == ticket.id)
                              .order_by(TicketMessage.id).limit(1)) == "email"
    return ticket.state == "open" or by_email


def has_written_by_email(session: Session, address: str) -> bool:
    """Whether ``address`` (case folded) sent us an e-mail that was accepted: then mail to it may quote its words."""
    return session.scalar(sa.select(sa.exists().where(
        sa.func.lower(InboundEmail.sender) == address.strip().lower(), InboundEmail.status == "processed",
        InboundEmail.related_ticket_id.is_(None)))) is True


def has_opened_a_signed_link(session: Session, address: str) -> bool:
    """Whether a ticket of ``address`` (case folded) was opened through a valid signed link, which only ever goes
    to that ticket's address by e-mail: whoever opened it reads that mailbox."""
    return session.scalar(sa.select(sa.exists().where(
        sa.func.lower(Ticket.customer_email) == address.strip().lower(),
        Ticket.link_verified_at.is_not(None)))) is True


def address_is_verified(session: Session, address: str) -> bool:
    """Mail to ``address`` may quote its words: it wrote to us by e-mail, or clicked a signed link we sent it."""
    return has_written_by_email(session, address) or has_opened_a_signed_link(session, address)


def acknowledgement_text(ticket: Ticket, *, link: str, answer: str | None, trusted: bool) -> tuple[str, str]:
    """(subject, body) of the acknowledgement: the customer's subject and the AI's answer only for an address that
    wrote to us itself; otherwise nothing anyone typed (a form can name any address: no relay for their words)."""
    if trusted:
        parts = [f"We received your question ({ticket.subject!s}). Your ticket reference is T-{ticket.id}.",
                 answer or "A support agent will reply to this address."]
        subject = f"[T-{ticket.id}] {ticket.subject}"
    else:
        parts = [f"A support request was sent to us with this e-mail address. Its reference is T-{ticket.id}.",
                 "If it was not you, you can ignore this e-mail: nothing else will be sent unless you reply.",
                 "A support agent will reply to this address."]
        subject = f"[T-{ticket.id}] We received your support request"
    parts += [f"Your ticket, and any reply, is always at:\n{link}", "You can also reply to this e-mail."]
    return subject, "\n\n".join(parts)


def may_acknowledge(session: Session, settings: Settings, ticket: Ticket) -> bool:
    """An acknowledgement is owed, and at most MAIL_ACK_PER_ADDRESS_PER_HOUR go to one address (and
    MAIL_ACK_PER_DOMAIN_PER_HOUR to one domain): nobody can make this server mail a stranger at will."""
    if not _owed_acknowledgement(session, ticket):
        return False
    if recent_acknowledgements(session, ticket.customer_email) >= settings.mail_ack_per_address_per_hour:
        return False  # counted per mailbox: case and plus tags folded (victim+1@, victim+2@ … are one person)
    domain = ticket.customer_email.rpartition("@")[2]
    return recent_acknowledgements_to_domain(session, domain) < settings.mail_ack_per_domain_per_hour


def _escalate_unacknowledged(session: Session, settings: Settings, ticket: Ticket) -> None:
    """An owed acknowledgement the per-address cap suppressed: the customer hears nothing, so a person must see
    the ticket (its AI answer was never mailed)."""
    if ticket.state == "open":
        return  # already in the agents' queue (and the team was told when it got there)
    apply_event(session, ticket, "escalated", SYSTEM, first_response_hours=settings.first_response_hours)
    ticket.status = "needs_agent"
    add_message(session, ticket.id, "internal_note", SUPPRESSED_NOTE, channel="email")
    session.flush()
    notify_unassigned(session, settings, ticket, why="Its acknowledgement was suppressed (too many to one address)")


def forgo_acknowledgement(session: Session, ticket_id: int) -> None:
    """No acknowledgement for this ticket (a limit on the client said no): nothing owed for recovery to send."""
    session.execute(sa.update(Ticket).where(Ticket.id == ticket_id).values(ack_pending=False))


def acknowledge(session: Session, settings: Settings, ticket_id: int, *, answer: str | None,
                link: str | None = None) -> bool:
    """Queue the "we have your ticket" e-mail with the ticket's signed link (and the AI's answer when there is one).

    ``link`` is ignored: the link is always the one builder's (service.links), never a caller's request Host.

    False, and nothing queued, when ``may_acknowledge`` says no (or there is no SMTP). Only to the ticket's own
    address (an e-mail's From, never its Reply-To), quoting the customer only once that address wrote to us
    or opened a signed link.
    """
    ticket = work_ticket(session, ticket_id, lock=True)
    ticket.ack_pending = False  # decided now, under the row lock: queued, suppressed (and escalated) or not owed
    if not may_acknowledge(session, settings, ticket):
        if settings.smtp_host and _owed_acknowledgement(session, ticket):
            _escalate_unacknowledged(session, settings, ticket)
        return False
    subject, body = acknowledgement_text(ticket, link=ticket_link(settings, ticket.id), answer=answer,
                                         trusted=address_is_verified(session, ticket.customer_email))
    row = enqueue_mail(session, settings, ticket, subject=subject, body=body, auto_submitted="auto-replied")
    return row is not None


def mail_statuses(session: Session, ticket_id: int) -> dict[str, str]:
    """Message-ID → ``sent``, ``queued`` (not yet delivered) or ``failed`` for the ticket's outgoing e-mails."""
    return {mid: state.status for mid, state in mail_states(session, ticket_id).items()}
