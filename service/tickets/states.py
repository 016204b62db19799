"""The ticket's work state for agents, as one state machine: open (needs a person), pending (waiting on the
customer), solved; NULL while no person is needed (e.g. the AI answered and the customer has not escalated).

``next_state`` is pure (tested table-driven); ``apply_event`` stores the change with who made it and when.
Every way into ``solved`` goes through ``solve_ticket``: the one place a "solved" hook belongs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import WORK_STATES, Ticket, TicketTransition
from service.tickets.similar import follow_solved_state
from service.validation import ValidationError

ANY = (None, *WORK_STATES)
# event → the states it may start from → the state it leads to (None: the caller's requested state).
TRANSITIONS: dict[str, dict[str | None, str | None]] = {
    "escalated": {s: "open" for s in ANY},  # "talk to a person", or a gate hand-off with an e-mail
    "customer_follow_up": {s: "open" for s in ANY},
    "customer_solved": {None: "solved", "open": "solved", "pending": "solved"},
    "agent_reply": {s: None for s in ANY},  # the agent picks open, pending or solved
    "agent_set_state": {s: None for s in ANY},
    "erased": {"open": "solved", "pending": "solved"},  # the customer's data erased: nothing left to work on
}
ACTORS = ("customer", "agent", "system")


class InvalidTransition(ValueError):
    """An event that does not apply to the ticket's current state."""


@dataclass(frozen=True)
class Actor:
    """Who made a change: the customer, the system, or an agent (``user_id``)."""

    kind: str
    user_id: int | None = None


CUSTOMER, SYSTEM = Actor("customer"), Actor("system")


def next_state(current: str | None, event: str, requested: str | None = None) -> str | None:
    """The state ``event`` leads to from ``current``; ``requested`` is the agent's choice where it has one."""
    targets = TRANSITIONS.get(event)
    if targets is None or current not in targets:
        raise InvalidTransition(f"{event!r} does not apply to a ticket in state {current!r}")
    target = targets[current]
    if target is None:
        if requested not in WORK_STATES:
            raise ValidationError("invalid state", {"status": f"must be one of {', '.join(WORK_STATES)}"})
        target = requested
    return target


def _record(session: Session, ticket: Ticket, event: str, target: str | None, actor: Actor) -> None:
    session.add(TicketTransition(ticket_id=ticket.id, from_state=ticket.state, to_state=target, event=event,
                                 actor=actor.kind, actor_user_id=actor.user_id))
    if (target == "solved") != (ticket.state == "solved"):  # similar-ticket evidence: solved tickets only
        follow_solved_state(session, ticket.id, solved=target == "solved")
    ticket.state = target


def lock_ticket(session: Session, ticket: Ticket) -> None:
    """``SELECT … FOR UPDATE`` the ticket's row and refresh it (a no-op wait once this transaction holds it)."""
    session.flush()
    session.refresh(ticket, with_for_update=True)


def apply_event(session: Session, ticket: Ticket, event: str, actor: Actor, *, requested: str | None = None,
                first_response_hours: float = 8.0) -> str | None:
    """Move ``ticket`` on ``event`` and store the transition; returns the new state.

    The ticket's row is locked and re-read first (the caller's pending changes flushed), so the recorded
    ``from_state`` is the state the last committed change left, whoever races this one.
    """
    lock_ticket(session, ticket)
    target = next_state(ticket.state, event, requested)
    if target == "solved":
        solve_ticket(session, ticket, actor, event=event, public_reply=event == "agent_reply")
        return target
    if target == "open" and ticket.state != "open":
        now = sa.func.now()
        if ticket.opened_at is None:  # first opening: the first-response time counts from here
            ticket.opened_at = now
        ticket.due_at = now + timedelta(hours=first_response_hours)  # every (re)opening owes a response
    _record(session, ticket, event, target, actor)
    return target


def solve_ticket(session: Session, ticket: Ticket, actor: Actor, *, event: str, public_reply: bool) -> None:
    """Mark the ticket solved: by the customer (self-served) or by an agent, with or without a public reply.

    The knowledge loop hooks here: "an agent solved this ticket with a public reply" is
    ``actor.kind == "agent" and public_reply``.
    """
    ticket.solved_by = "agent" if actor.kind == "agent" else "customer" if actor.kind == "customer" else "system"
    _record(session, ticket, event, "solved", actor)
