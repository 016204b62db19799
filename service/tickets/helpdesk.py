"""The customer's side of a ticket: open it with its secret, mark it solved, or send it to an agent.

Use cases take a session and never commit; the help page's views commit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AnswerFeedback, Article, Ticket
from service.knowledge.articles import BIGINT_MAX
from service.tickets.answering import HANDOFF_MESSAGE
from service.tickets.queries import TicketNotFound, TicketView, get_ticket
from service.tickets.secrets import secret_matches
from service.tickets.states import CUSTOMER, apply_event
from service.tickets.thread import add_message
from service.tickets.validation import BODY_MAX, SUBJECT_MAX, is_email
from service.validation import ValidationError

SUBJECT_CHARS = 120
# Passed as ``key`` by a view that verified a signed link (service.links) for the ticket: no secret is needed.
# A sentinel object, so nothing a client sends can equal it.
LINK_VERIFIED: object = object()


@dataclass(frozen=True)
class CustomerTicket:
    """What the customer may see of their ticket: the answer and where the ticket stands."""

    ticket: TicketView
    resolved_at: datetime | None
    escalated_at: datetime | None
    escalation_reason: str | None
    escalated_now: bool = False  # escalate(): this call was the first (decided under the row lock)

    @property
    def reference(self) -> str:
        """The reference the customer quotes to an agent."""
        return ticket_reference(self.ticket.id)

    @property
    def handed_off(self) -> bool:
        """Whether the customer got the hand-off message instead of an answer."""
        return self.ticket.answer is None or self.ticket.answer == HANDOFF_MESSAGE

    @property
    def with_agent(self) -> bool:
        """Whether an agent has the ticket (the customer escalated it and left an email)."""
        return self.escalated_at is not None


@dataclass(frozen=True)
class Source:
    """An article an answer cites: ``number`` is the [n] in the answer, ``section`` the part that matched."""

    number: int
    article_id: int
    title: str
    section: str | None  # "Title › Heading", None when the article has no headings


def ticket_reference(ticket_id: int) -> str:
    """``T-<id>``: short enough to read out on the phone."""
    return f"T-{ticket_id}"


def subject_from_description(description: str) -> str:
    """The first line of what the customer typed, cut at a word near 120 characters."""
    first = next((line.strip() for line in description.splitlines() if line.strip()), "")
    if len(first) <= SUBJECT_CHARS:
        return first
    cut = first.rfind(" ", 0, SUBJECT_CHARS)
    return first[: cut if cut > 0 else SUBJECT_CHARS].rstrip(",;:") + "…"


def ticket_fields(description: str) -> dict[str, str]:
    """The ticket fields (subject and body) for a help-page description."""
    return {"subject": subject_from_description(description)[:SUBJECT_MAX], "body": description}


def _owned_ticket(session: Session, ticket_id: int, key: str | None, *, lock: bool = False) -> Ticket:
    """The ticket if ``key`` is its secret; a wrong key looks exactly like a missing ticket.

    ``lock``: the row is locked (``FOR UPDATE``) and read afresh, for a change of state.
    """
    options = {"with_for_update": True, "populate_existing": True} if lock else {}
    ticket = session.get(Ticket, ticket_id, **options) if 1 <= ticket_id <= BIGINT_MAX else None
    if ticket is None or (key is not LINK_VERIFIED and not secret_matches(ticket.secret_sha256, key)):
        raise TicketNotFound(ticket_id)
    return ticket


def _customer_view(session: Session, ticket: Ticket) -> CustomerTicket:
    return CustomerTicket(ticket=get_ticket(session, ticket.id), resolved_at=ticket.resolved_at,
                          escalated_at=ticket.escalated_at, escalation_reason=ticket.escalation_reason)


def customer_ticket(session: Session, ticket_id: int, key: str | None) -> CustomerTicket:
    """The ticket for its secret link, or TicketNotFound."""
    return _customer_view(session, _owned_ticket(session, ticket_id, key))


def mark_solved(session: Session, ticket_id: int, key: str | None) -> CustomerTicket:
    """Record that the answer solved the problem (self-served); once, and never after an escalation."""
    ticket = _owned_ticket(session, ticket_id, key, lock=True)
    if ticket.resolved_at is None and ticket.escalated_at is None:
        ticket.resolved_at = sa.func.now()
        apply_event(session, ticket, "customer_solved", CUSTOMER)
        session.add(AnswerFeedback(ticket_id=ticket.id, helpful=True, comment="solved (help page)"))
        session.flush()
        session.refresh(ticket)
    return _customer_view(session, ticket)


def record_signed_link_opened(session: Session, ticket_id: int) -> None:
    """A valid signed link of the ticket was opened: its address reads the mail we sent it (the first time counts)."""
    session.execute(sa.update(Ticket).where(Ticket.id == ticket_id, Ticket.customer_email.is_not(None),
                                            Ticket.link_verified_at.is_(None))
                    .values(link_verified_at=sa.func.now()))


def escalate(session: Session, ticket_id: int, key: str | None, *, email: str,
             asked_for_person: bool = False, first_response_hours: float = 8.0) -> CustomerTicket:
    """Send the ticket to an agent, who replies to ``email``; a second request only updates the email."""
    if not is_email(email):
        raise ValidationError("invalid escalation", {"email": "must be an email address"})
    ticket = _owned_ticket(session, ticket_id, key, lock=True)
    view = _customer_view(session, ticket)
    if (ticket.customer_email or "").lower() != email.strip().lower():
        ticket.link_verified_at = None  # a signed link opened by the old address vouches for it, not the new one
    ticket.customer_email = email.strip()
    first_time = ticket.escalated_at is None  # read under the row lock: two racing requests cannot both see it
    if first_time:
        reason = "asked_for_person" if asked_for_person else "handed_off" if view.handed_off else "not_solved"
        if not view.handed_off:
            # An answer that did not help feeds the content-gap report, as API feedback does.
            session.add(AnswerFeedback(ticket_id=ticket.id, helpful=False, comment=f"escalated: {reason}"))
        ticket.escalated_at, ticket.escalation_reason = sa.func.now(), reason
        ticket.status, ticket.resolved_at = "needs_agent", None
        if ticket.state != "open":
            apply_event(session, ticket, "escalated", CUSTOMER, first_response_hours=first_response_hours)
    session.flush()
    session.refresh(ticket)
    return replace(_customer_view(session, ticket), escalated_now=first_time)


def follow_up(session: Session, ticket_id: int, key: str | None, body: str, *,
              first_response_hours: float = 8.0) -> CustomerTicket:
    """The customer writes again on their ticket page: added to the thread, and the ticket (re)opens."""
    body = body.strip() if isinstance(body, str) else ""
    if not body or len(body) > BODY_MAX or "\x00" in body:
        raise ValidationError("invalid follow-up", {"body": f"must be 1 to {BODY_MAX} characters"})
    ticket = _owned_ticket(session, ticket_id, key, lock=True)
    add_message(session, ticket.id, "customer", body, channel="web")
    apply_event(session, ticket, "customer_follow_up", CUSTOMER, first_response_hours=first_response_hours)
    session.flush()
    return _customer_view(session, ticket)


def answer_sources(session: Session, view: TicketView) -> list[Source]:
    """The cited articles that still exist, each pointed at the section the answer was drafted from."""
    cited = [c for c in view.citations if c["cited"] and c["article_id"] is not None]
    existing = set(session.scalars(sa.select(Article.id).where(Article.id.in_([c["article_id"] for c in cited]))))
    return [Source(c["rank"], c["article_id"], c["title"], c["section"]) for c in cited if c["article_id"] in existing]
