"""Concurrency on a real database with separate connections (issue 24 items 6 and 10): the outbox's leases and
no SMTP inside a transaction; ticket row locks under racing replies, assigns and solves."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
import sqlalchemy as sa

from service.accounts import create_admin
from service.config import Settings
from service.db.models import MailOutbox, Ticket, TicketMessage, TicketTransition
from service.mail.delivery import claim_next, deliver_due_mail
from service.runtime import Runtime
from service.tickets.states import SYSTEM, Actor, apply_event
from service.tickets.work import assign_ticket, send_reply

from .conftest import admin_conninfo

ROUNDS, RACERS = 8, 3


@pytest.fixture(scope="module")
def committed(pg_url, tmp_path_factory):
    """A runtime on its own migrated database whose sessions really commit (each on its own connection)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    settings = Settings(database_url=url, data_dir=tmp_path_factory.mktemp("races"), auto_seed=False,
                        smtp_host="127.0.0.1")
    runtime = Runtime.start(settings, seed=False)
    yield runtime
    runtime.close()
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def outbox(committed):
    """The runtime with an empty outbox."""
    with committed.session() as session:
        session.execute(sa.delete(MailOutbox))
    return committed


def _queue(runtime, message_id: str) -> None:
    with runtime.session() as session:
        session.add(MailOutbox(to_address="c@example.com", subject="s", body="b", message_id=message_id))


def test_item_6_no_smtp_conversation_runs_inside_a_database_transaction(outbox):
    _queue(outbox, "<probe@example.com>")
    seen: list[tuple[int, int]] = []

    class Probe:
        """A transport that checks, from another connection, that nobody holds the row or a transaction."""

        def send(self, message) -> None:
            with outbox.engine.connect() as conn:
                locked = conn.execute(sa.text("SELECT id FROM mail_outbox WHERE message_id = :m FOR UPDATE NOWAIT"),
                                      {"m": message["Message-ID"]}).all()
                open_transactions = conn.scalar(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'"))
                conn.rollback()
            seen.append((len(locked), open_transactions))

    outcome = deliver_due_mail(outbox.session, outbox.settings, Probe())
    assert seen == [(1, 0)] and outcome.sent == 1


def test_item_6_a_claim_holds_a_lease_and_a_lapsed_lease_is_claimed_again(outbox):
    _queue(outbox, "<lease@example.com>")
    first = claim_next(outbox.session, outbox.settings)
    assert first is not None
    assert claim_next(outbox.session, outbox.settings) is None  # another worker skips it while the lease runs
    with outbox.session() as session:  # the first worker died mid-send: its lease runs out
        session.execute(sa.update(MailOutbox).values(locked_until=sa.func.now() - sa.text("interval '1 second'")))
    again = claim_next(outbox.session, outbox.settings)
    assert again is not None and again.outbox_id == first.outbox_id  # sent again: at-least-once, as documented


def _racer(runtime, ticket_id: int, agents: list[int], n: int, barrier: threading.Barrier, errors: list) -> None:
    agent = Actor("agent", agents[n])
    try:
        for i in range(ROUNDS):
            barrier.wait(timeout=30)
            with runtime.session() as session:
                step = (n + i) % 3
                if step == 0:
                    send_reply(session, runtime.settings, ticket_id,
                               {"body": f"reply {n}.{i}", "status": ("pending", "open", "solved")[i % 3]}, agent=agent)
                elif step == 1:
                    assign_ticket(session, ticket_id, agents[(n + i) % RACERS])
                    send_reply(session, runtime.settings, ticket_id, {"body": "note", "internal": True,
                                                                      "status": "open"}, agent=agent)
                else:
                    send_reply(session, runtime.settings, ticket_id, {"body": "done", "internal": True,
                                                                      "status": "solved"}, agent=agent)
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
        barrier.abort()


def test_item_10_racing_replies_assigns_and_solves_leave_a_consistent_transition_log(committed):
    with committed.session() as session:
        ticket = Ticket(subject="Race", body="Racing agents", customer_email="race@example.com",
                        status="needs_agent")
        session.add(ticket)
        session.flush()
        apply_event(session, ticket, "escalated", SYSTEM)
        suffix = uuid.uuid4().hex[:6]
        agents = [create_admin(session, f"racer{n}{suffix}", "correct horse battery", role="agent").id
                  for n in range(RACERS)]
        ticket_id = ticket.id
    barrier, errors = threading.Barrier(RACERS), []
    threads = [threading.Thread(target=_racer, args=(committed, ticket_id, agents, n, barrier, errors))
               for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with committed.session() as session:
        log = session.execute(sa.select(TicketTransition.from_state, TicketTransition.to_state)
                              .where(TicketTransition.ticket_id == ticket_id).order_by(TicketTransition.id)).all()
        ticket = session.get(Ticket, ticket_id)
        first_reply_at = session.scalar(sa.select(TicketMessage.created_at).where(
            TicketMessage.ticket_id == ticket_id, TicketMessage.kind == "agent_reply").order_by(TicketMessage.id))
    print(f"\nrace: {RACERS} threads x {ROUNDS} rounds, {len(log)} transitions, "
          f"{sum(after.from_state != before.to_state for before, after in zip(log, log[1:]))} inconsistent")
    assert len(log) > RACERS * ROUNDS / 3
    broken = [(n, before.to_state, after.from_state) for n, (before, after) in enumerate(zip(log, log[1:]), 1)
              if after.from_state != before.to_state]
    assert broken == []
    assert ticket.state == log[-1].to_state
    assert ticket.first_response_at == first_reply_at  # the first reply stored, never overwritten by a later one
