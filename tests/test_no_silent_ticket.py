"""Issue 33 item 1: no silent ticket. The acknowledgement is owed with the stored ticket and completed after a
kill -9; a suppressed acknowledgement sends the ticket to an agent; an answer failure notifies the team; recovery
claims with a lease and the first stored answer wins."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time
from datetime import timedelta
from email.message import EmailMessage

import pytest
import sqlalchemy as sa

from service.db.models import MailOutbox, Ticket, TicketAnswer
from service.intake.signature import sign
from service.tickets.recovery import CLAIM_SQL, recover_stuck_tickets
from service.tickets.workflow import finish_ticket

from .helpers import run_cli

SECRET = "inbound-test-secret"
PASSWORD = "How do I reset my password? The reset email never arrived."
TEAM = "team@example.com"
PUBLIC = "https://help.example.com"


@pytest.fixture
def mailing(seeded):
    """SMTP configured (outbox rows are read, nothing is sent), a team address, the inbound webhook, one
    acknowledgement per address per hour."""
    seeded.settings = dataclasses.replace(
        seeded.settings, smtp_host="127.0.0.1", smtp_port=1, mail_from="support@example.com", public_url=PUBLIC,
        notify_team_address=TEAM, inbound_email_secret=SECRET, mail_ack_per_address_per_hour=1)
    return seeded


def outbox_to(runtime, address: str) -> list[MailOutbox]:
    with runtime.session() as session:
        return list(session.scalars(sa.select(MailOutbox).where(MailOutbox.to_address == address)
                                    .order_by(MailOutbox.id)))


def mail_in(client, message_id: str, body: str = PASSWORD) -> int:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "maria@example.com", "support@example.com", "Password"
    message["Message-ID"] = message_id
    message.set_content(body)
    raw = bytes(message)
    response = client.post("/api/inbound/email", data=raw, headers={
        "X-Signature": sign(SECRET, raw, int(time.time())), "Content-Type": "message/rfc822"})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["outcome"]["ticket_id"]


def test_a_suppressed_acknowledgement_sends_the_ticket_to_an_agent(mailing, anonymous_client):
    first = mail_in(anonymous_client, "<a1@customer.test>")
    second = mail_in(anonymous_client, "<a2@customer.test>")  # over the cap: no e-mail may go to this address
    assert [row.ticket_id for row in outbox_to(mailing, "maria@example.com")] == [first]
    with mailing.session() as session:
        ticket = session.get(Ticket, second)
        assert (ticket.state, ticket.status, ticket.ack_pending) == ("open", "needs_agent", False)
    told = outbox_to(mailing, TEAM)
    assert [row.subject for row in told] == [f"[T-{second}] Needs an agent: Password"]


class BrokenChat:
    """A chat model that fails in a way the workflow does not expect (not an LLMError)."""

    def complete(self, messages):
        raise RuntimeError("the model client crashed")


def test_an_answer_failure_notifies_the_team(mailing):
    with mailing.session() as session:
        ticket = Ticket(subject="Password", body=PASSWORD, status="received", customer_email="maria@example.com")
        session.add(ticket)
        session.flush()
        ticket_id = ticket.id
    finish_ticket(mailing, BrokenChat(), ticket_id, "Password", PASSWORD, started=time.perf_counter())
    told = outbox_to(mailing, TEAM)
    assert len(told) == 1 and "Answering failed" in told[0].body and f"T-{ticket_id}" in told[0].subject


def test_recovery_claims_with_a_lease_and_the_first_stored_answer_wins(mailing):
    with mailing.session() as session:
        ticket = Ticket(subject="Password", body=PASSWORD, status="received",
                        created_at=sa.func.now() - timedelta(minutes=10))
        session.add(ticket)
        session.flush()
        ticket_id = ticket.id
    with mailing.session() as session:
        assert session.execute(CLAIM_SQL, {"lease": 600, "ticket_id": ticket_id}).one_or_none() is not None
    assert recover_stuck_tickets(mailing, None, older_than_seconds=300).outcomes == {}  # another sweeper has it
    # The slow first worker and a second one both finish: one answer is stored.
    finish_ticket(mailing, None, ticket_id, "Password", PASSWORD, started=time.perf_counter())
    finish_ticket(mailing, None, ticket_id, "Password", PASSWORD, started=time.perf_counter())
    with mailing.session() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(TicketAnswer)
                              .where(TicketAnswer.ticket_id == ticket_id)) == 1


KILLED_AFTER_COMMIT = """
import os, signal
from service.runtime import Runtime
from service.tickets.workflow import answer_ticket
runtime = Runtime.start()
ticket_id = answer_ticket(runtime, None, {"subject": "Parrots", "body": "Do you ship parrot food to Mars?",
                                          "email": "maria@example.com"})
print(ticket_id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # after the ticket's commit, before its acknowledgement
"""


def test_kill_9_between_the_commit_and_the_acknowledgement_then_recovery_mails_it(cli_env, db_engine, monkeypatch):
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SUPPORTRAG_PUBLIC_URL", PUBLIC)
    run_cli("seed")
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_COMMIT], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ticket_id = int(killed.stdout.strip())
    with db_engine.begin() as conn:
        assert conn.scalar(sa.select(Ticket.ack_pending).where(Ticket.id == ticket_id)) is True
        assert conn.scalar(sa.select(sa.func.count()).select_from(MailOutbox)) == 0  # lost, today
    run_cli("tickets", "recover", "--older-than", "0")
    with db_engine.begin() as conn:
        bodies = conn.scalars(sa.select(MailOutbox.body).where(MailOutbox.ticket_id == ticket_id)).all()
        assert conn.scalar(sa.select(Ticket.ack_pending).where(Ticket.id == ticket_id)) is False
    assert len(bodies) == 1 and f"{PUBLIC}/help/tickets/{ticket_id}?link=" in bodies[0]
    run_cli("tickets", "recover", "--older-than", "0")  # once only
    with db_engine.begin() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(MailOutbox)) == 1


def test_agent_notifications_are_batched_per_address_per_minute(mailing, session):
    from service.mail.outbox import enqueue_notification

    for n in range(10):
        enqueue_notification(session, mailing.settings, to_address="agnes@example.com", subject=f"T-{n}",
                             body=f"ticket {n} needs you")
    enqueue_notification(session, mailing.settings, to_address="bert@example.com", subject="T-0", body="bert's")
    rows = outbox_to(mailing, "agnes@example.com")
    assert len(rows) == 4  # three at once, the other seven in one e-mail when the minute is up
    assert [row.body for row in rows[:3]] == [f"ticket {n} needs you" for n in range(3)]
    assert [f"ticket {n} needs you" in rows[3].body for n in range(3, 10)] == [True] * 7
    assert rows[3].subject == "7 notifications, the latest: T-9"
    assert (rows[3].next_attempt_at - rows[2].created_at).total_seconds() == pytest.approx(60, abs=1)
    assert len(outbox_to(mailing, "bert@example.com")) == 1
