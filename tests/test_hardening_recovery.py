"""Issue 16, item 9: no ticket stays ``received`` after its worker died; the sweep answers or fails each one."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from service.db.models import Ticket, TicketAnswer
from service.tickets.recovery import recover_stuck_tickets

from .helpers import run_cli

PASSWORD = "I forgot my password and the reset email never arrived"


def leave_received(runtime, subject: str, *, age: timedelta) -> int:
    """What a worker killed mid-answer leaves behind: a stored ticket, ``received``, no answer."""
    with runtime.session() as session:
        ticket = Ticket(subject=subject, body=subject, status="received", created_at=sa.func.now() - age)
        session.add(ticket)
        session.flush()
        return ticket.id


def status_of(runtime, ticket_id: int) -> str:
    with runtime.session() as session:
        return session.scalar(sa.select(Ticket.status).where(Ticket.id == ticket_id))


def test_item_9_the_sweep_answers_tickets_stuck_past_the_timeout_and_leaves_recent_ones(seeded):
    stuck = leave_received(seeded, PASSWORD, age=timedelta(minutes=10))
    recent = leave_received(seeded, PASSWORD, age=timedelta(seconds=5))  # its worker may still be at it
    recovery = recover_stuck_tickets(seeded, None, older_than_seconds=300)
    assert recovery.outcomes == {stuck: "answered"}
    assert status_of(seeded, recent) == "received"
    with seeded.session() as session:
        answer = session.scalar(sa.select(TicketAnswer).where(TicketAnswer.ticket_id == stuck))
        assert answer.mode == "extractive" and answer.answer


class BrokenChat:
    """A chat model that fails in a way the workflow does not expect (not an LLMError)."""

    def complete(self, messages):
        raise RuntimeError("the model client crashed")


def test_item_9_a_stuck_ticket_that_cannot_be_answered_is_marked_failed_not_left_silent(seeded):
    stuck = leave_received(seeded, PASSWORD, age=timedelta(hours=2))
    assert recover_stuck_tickets(seeded, BrokenChat(), older_than_seconds=300).outcomes == {stuck: "failed"}


def test_item_9_supportrag_tickets_recover_answers_stuck_tickets(cli_env, db_engine):
    run_cli("seed")
    with db_engine.begin() as conn:
        stuck = conn.scalar(sa.insert(Ticket).values(subject=PASSWORD, body=PASSWORD, status="received",
                                                     created_at=sa.func.now() - timedelta(minutes=6))
                            .returning(Ticket.id))
    result = run_cli("tickets", "recover")
    assert "1 stuck ticket(s) older than 300 s" in result.output
    assert f"ticket {stuck}: answered" in result.output
    with db_engine.connect() as conn:
        assert conn.scalar(sa.select(Ticket.status).where(Ticket.id == stuck)) == "answered"
