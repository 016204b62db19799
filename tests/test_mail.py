"""E-mail through a real SMTP server on loopback: the outbox, threading, SMTP outages, inbound mail."""

from __future__ import annotations

import dataclasses
import re
import time
from email.message import EmailMessage

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from service.cli.main import main
from service.db.models import MailOutbox, Ticket, TicketMessage
from service.intake.parse import parse_email
from service.intake.quoted import strip_quoted
from service.intake.signature import sign
from service.mail.delivery import deliver_due_mail

from .helpers import assert_error
from .smtp_server import SmtpSink

SECRET = "inbound-test-secret"


@pytest.fixture
def smtp():
    """A running SMTP server on 127.0.0.1."""
    with SmtpSink() as sink:
        yield sink


@pytest.fixture
def mailing(seeded, smtp):
    """The test runtime sending to ``smtp``, with plus-addressed replies and the inbound webhook on."""
    seeded.settings = dataclasses.replace(
        seeded.settings, smtp_host="127.0.0.1", smtp_port=smtp.port, mail_from="Support <support@example.com>",
        mail_reply_to="support+{token}@example.com", inbound_email_secret=SECRET)
    return seeded


def deliver(runtime):
    """One worker pass, as the mail worker makes it."""
    from service.mail.transport import SmtpTransport

    return deliver_due_mail(runtime.session, runtime.settings, SmtpTransport(runtime.settings, timeout=5))


def _ticket(client, subject="Parrot food", body="Do you ship parrot food to Mars?"):
    created = client.post("/api/tickets", json={"subject": subject, "body": body, "email": "alice@example.com"})
    assert created.status_code == 201, created.get_data(as_text=True)
    return created.get_json()["ticket"]["id"], created.get_json()["secret"]


def test_a_new_ticket_and_an_agent_reply_arrive_threaded_with_the_secret_link(mailing, smtp, client):
    ticket_id, secret = _ticket(client)
    assert deliver(mailing).sent == 1
    ack = smtp.wait_for(1)[0]
    assert ack["To"] == "alice@example.com" and ack["Auto-Submitted"] == "auto-replied"
    assert f"/help/tickets/{ticket_id}?link=" in ack.get_content() and secret not in ack.get_content()
    token = re.fullmatch(r"support\+(.+)@example\.com", ack["Reply-To"]).group(1)
    kept = mailing.sessions().scalars(sa.select(MailOutbox.body).where(MailOutbox.ticket_id == ticket_id)).all()
    assert kept and not any(secret in body for body in kept)  # the secret link is not kept once sent
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "We ship to Earth only."})
    assert reply.get_json()["message"]["email"] == "queued"
    assert deliver(mailing).sent == 1
    answer = smtp.wait_for(2)[1]
    assert answer["In-Reply-To"] == ack["Message-ID"] and ack["Message-ID"] in answer["References"]
    assert answer["Message-ID"] == reply.get_json()["message"]["email_message_id"]
    assert answer["Reply-To"] == f"support+{token}@example.com" and answer["Auto-Submitted"] is None
    assert "We ship to Earth only." in answer.get_content()
    messages = client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"]
    assert messages[-1]["email"] == "sent"


def test_smtp_down_keeps_the_reply_says_queued_and_sends_exactly_once_when_back(mailing, smtp, client, session):
    ticket_id, _ = _ticket(client)
    deliver(mailing)
    smtp.stop()
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Sent while the mail server is down."})
    assert reply.status_code == 201 and reply.get_json()["message"]["email"] == "queued"
    outcome = deliver(mailing)
    assert (outcome.sent, outcome.failed) == (0, 1)
    row = session.scalars(sa.select(MailOutbox).where(MailOutbox.ticket_id == ticket_id)
                          .order_by(MailOutbox.id.desc())).first()
    assert row.sent_at is None and row.attempts == 1 and "Connection refused" in row.last_error
    assert deliver(mailing).sent == 0  # backing off: not due yet
    smtp.start()
    session.execute(sa.update(MailOutbox).where(MailOutbox.id == row.id).values(next_attempt_at=sa.func.now()))
    session.commit()
    assert deliver(mailing).sent == 1
    assert deliver(mailing).sent == 0
    mid = reply.get_json()["message"]["email_message_id"]
    assert [m["Message-ID"] for m in smtp.wait_for(2)].count(mid) == 1
    statuses = {m["email_message_id"]: m["email"] for m in
                client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"]}
    assert statuses[mid] == "sent"


def test_a_subject_with_line_breaks_cannot_inject_headers(mailing, smtp, client):
    ticket_id, _ = _ticket(client, subject="Hello\r\nBcc: victim@example.com\r\nX-Evil: 1",
                           body="Do you ship parrot food to Mars?")
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Yes."})  # "Re: <the subject>"
    sent = [m for m in smtp.wait_for(deliver(mailing).sent) if m["Auto-Submitted"] is None][0]
    assert sent["Bcc"] is None and sent["X-Evil"] is None
    assert "Bcc: victim@example.com" in sent["Subject"]  # kept as text, on one line


def _email(*, to="support@example.com", subject="Re: Parrot food", body="Thanks!", message_id="<c1@customer.test>",
           in_reply_to=None, **headers) -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"], message["Message-ID"] = (
        "Alice <alice@example.com>", to, subject, message_id)
    if in_reply_to:
        message["In-Reply-To"] = message["References"] = in_reply_to
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return bytes(message)


def _post(client, raw: bytes, secret: str = SECRET):
    signature = sign(secret, raw, int(time.time()))
    return client.post("/api/inbound/email", data=raw, headers={"X-Signature": signature,
                                                                "Content-Type": "message/rfc822"})


QUOTED = "Mars, the red one.\n\nOn Tue, Dec 1, 2026 at 10:00 AM Support <support@example.com> wrote:\n> Which planet?\n"


def test_a_reply_to_the_plus_address_becomes_a_follow_up_without_the_quoted_text(mailing, client, anonymous_client):
    ticket_id, _ = _ticket(client)
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"})
    token = anonymous_client.application.extensions["supportrag"].sessions().scalar(
        sa.select(Ticket.reply_token).where(Ticket.id == ticket_id))
    response = _post(anonymous_client, _email(to=f"support+{token}@example.com", body=QUOTED))
    assert response.status_code == 200
    assert response.get_json()["outcome"] == {"action": "follow_up", "ticket_id": ticket_id, "reason": ""}
    messages = client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"]
    assert messages[-1]["body"] == "Mars, the red one." and messages[-1]["channel"] == "email"
    assert client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]["state"] == "open"


def test_in_reply_to_matches_a_stored_message_id_and_a_duplicate_creates_nothing(mailing, client, anonymous_client,
                                                                                 session):
    ticket_id, _ = _ticket(client)
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"}).get_json()
    raw = _email(in_reply_to=reply["message"]["email_message_id"], body="Mars.")
    assert _post(anonymous_client, raw).get_json()["outcome"]["ticket_id"] == ticket_id
    count = session.scalar(sa.select(sa.func.count()).select_from(TicketMessage))
    tickets = session.scalar(sa.select(sa.func.count()).select_from(Ticket))
    again = _post(anonymous_client, raw).get_json()["outcome"]
    assert again["action"] == "duplicate"
    assert session.scalar(sa.select(sa.func.count()).select_from(TicketMessage)) == count
    assert session.scalar(sa.select(sa.func.count()).select_from(Ticket)) == tickets


@pytest.mark.parametrize("headers", [
    {"Auto_Submitted": "auto-replied"}, {"X_Autoreply": "yes"}, {"Precedence": "bulk"},
])
def test_auto_replies_create_nothing(mailing, anonymous_client, session, headers):
    before = session.scalar(sa.select(sa.func.count()).select_from(Ticket))
    outcome = _post(anonymous_client, _email(subject="Out of office", body="I am away.", **headers)).get_json()
    assert outcome["outcome"]["action"] == "ignored"
    assert session.scalar(sa.select(sa.func.count()).select_from(Ticket)) == before


def test_a_bounce_report_creates_nothing(mailing, anonymous_client, session):
    report = EmailMessage()
    report["From"], report["To"], report["Subject"] = "MAILER-DAEMON@mx.test", "support@example.com", "Undelivered"
    report["Message-ID"] = "<bounce1@mx.test>"
    report.set_content("Delivery failed.")
    report.add_attachment("Action: failed\n", subtype="delivery-status")
    report.replace_header("Content-Type", report["Content-Type"].replace("multipart/mixed", "multipart/report"))
    assert _post(anonymous_client, bytes(report)).get_json()["outcome"]["action"] == "ignored"
    assert session.scalar(sa.select(sa.func.count()).select_from(Ticket)) == 0


def test_a_forged_signature_gets_401_and_creates_nothing(mailing, anonymous_client, session):
    response = _post(anonymous_client, _email(subject="Hi", body="Do you ship parrot food?"), secret="forged")
    assert_error(response, 401, "invalid_signature")
    assert session.scalar(sa.select(sa.func.count()).select_from(Ticket)) == 0


def test_a_message_over_the_size_limit_gets_413(mailing, app, anonymous_client):
    mailing.settings = dataclasses.replace(mailing.settings, inbound_raw_max_bytes=64 * 1024)
    raw = _email(body="x" * (mailing.settings.inbound_raw_max_bytes + 10))
    assert_error(_post(anonymous_client, raw), 413, "request_entity_too_large")


def test_an_unmatched_email_becomes_a_new_ticket_answered_and_acknowledged(mailing, smtp, anonymous_client, client):
    outcome = _post(anonymous_client, _email(subject="Password", message_id="<new1@customer.test>",
                                             body="How do I reset my password?")).get_json()["outcome"]
    assert outcome["action"] == "new_ticket"
    ticket = client.get(f"/api/tickets/{outcome['ticket_id']}").get_json()["ticket"]
    assert ticket["status"] == "answered" and ticket["email"] == "alice@example.com"
    deliver(mailing)
    ack = smtp.wait_for(1)[0]
    assert ack["In-Reply-To"] == "<new1@customer.test>"


def test_the_inbound_webhook_is_off_without_a_secret(seeded, anonymous_client):
    assert_error(_post(anonymous_client, _email()), 404, "inbound_email_disabled")


@pytest.mark.parametrize("text, expected", [
    (QUOTED, "Mars, the red one."),
    ("Just this.", "Just this."),
    ("Danke!\n\nAm 01.12.2026 um 10:00 schrieb Support <support@example.com>:\n> Welcher?\n", "Danke!"),
    ("Merci\n\nLe mar. 1 déc. 2026 à 10:00, Support <s@example.fr> a écrit :\n> Laquelle ?", "Merci"),
    ("Sí\n\nEl mar, 1 dic 2026 a las 10:00, Support (<s@example.es>) escribió:\n> ¿Cuál?", "Sí"),
    ("Ja\n\nOp di 1 dec. 2026 om 10:00 schreef Support <s@example.nl>:\n> Welke?", "Ja"),
    ("Yes\n\nOn Tue, Dec 1, 2026 at 10:00 AM Support <\nsupport@example.com> wrote:\n> Which?", "Yes"),
    ("Ok\n\n________________________________\nFrom: Support <s@example.com>\nSent: Tuesday\nSubject: Hi\n\nold",
     "Ok"),
    ("Fine\n-----Original Message-----\nFrom: x\nold", "Fine"),
    ("On second thought, Mars.\nThanks", "On second thought, Mars.\nThanks"),
])
def test_quoted_reply_text_is_stripped(text, expected):
    assert strip_quoted(text) == expected


def test_parse_email_reads_references_newest_first():
    raw = _email(in_reply_to="<b@x>")
    assert parse_email(raw).thread_ids == ["<b@x>"]


def test_mail_pipe_creates_a_ticket_then_threads_a_reply_and_drops_the_duplicate(cli_env, monkeypatch, smtp):
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SUPPORTRAG_PUBLIC_URL", "https://help.example.com")
    monkeypatch.setenv("SMTP_PORT", str(smtp.port))
    runner = CliRunner()
    first = runner.invoke(main, ["mail", "pipe"], input=_email(subject="Parrots", message_id="<p1@customer.test>",
                                                                body="Do you ship parrot food to Mars?"))
    assert first.exit_code == 0, first.output
    assert '"action": "new_ticket"' in first.output
    reply = _email(message_id="<p2@customer.test>", in_reply_to="<p1@customer.test>", body="Any news?")
    second = runner.invoke(main, ["mail", "pipe"], input=reply)
    assert '"action": "follow_up"' in second.output, second.output
    third = runner.invoke(main, ["mail", "pipe"], input=reply)
    assert '"action": "duplicate"' in third.output
    worker = runner.invoke(main, ["mail", "worker", "--once"])
    assert worker.exit_code == 0 and "sent 1, failed 0" in worker.output, worker.output
    [ack] = smtp.wait_for(1)
    assert ack["To"] == "alice@example.com" and ack["In-Reply-To"] == "<p1@customer.test>"


def test_two_workers_at_once_send_each_email_exactly_once(db_engine, cli_env, smtp):
    """Two worker passes racing on a real database (as two gunicorn workers would): one e-mail per row."""
    import threading

    from service.config import Settings
    from service.mail.transport import SmtpTransport
    from service.runtime import Runtime

    runtime = Runtime.start(dataclasses.replace(Settings.from_env(), smtp_host="127.0.0.1", smtp_port=smtp.port),
                            seed=False)
    try:
        with runtime.session() as session:
            for n in range(6):
                session.add(MailOutbox(to_address=f"c{n}@example.com", subject="s", body="b",
                                       message_id=f"<race{n}@example.com>"))
        transport = SmtpTransport(runtime.settings, timeout=5)
        threads = [threading.Thread(target=deliver_due_mail, args=(runtime.session, runtime.settings, transport))
                   for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        deliver_due_mail(runtime.session, runtime.settings, transport)  # whatever the lock made one skip
        ids = sorted(m["Message-ID"] for m in smtp.wait_for(6))
        assert ids == sorted(f"<race{n}@example.com>" for n in range(6))
    finally:
        runtime.close()
