"""Outbound e-mail (issue 24 items 6-8, agents' reply attachments): a real SMTP server on loopback (aiosmtpd,
with a mailbox that answers 550) and the real PostgreSQL."""

from __future__ import annotations

import base64
import io
import dataclasses
import hashlib
import smtplib
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from service.accounts import create_admin
from service.cli.main import main
from service.config import Settings
from service.db.migrate import upgrade_database
from service.db.models import AdminUser, MailOutbox, TicketAttachment
from service.mail.compose import InvalidAddress
from service.mail.delivery import Delivery, deliver_due_mail, retry_span_seconds
from service.mail.transport import SmtpTransport, classify_failure
from service.mail.worker import MailWorker
from service.tickets.states import Actor
from service.tickets.work import send_reply

from .admin_helpers import csrf_from
from .helpers import assert_error
from .smtp_server import SmtpSink

SENDER = "Help Desk <support@example.com>"
UNKNOWN_MAILBOX = "nobody@example.com"
HANDED_OFF = "Do you ship parrot food to Mars?"  # nothing in the seed articles: the gate hands it to an agent
ANSWERED = "How do I reset my password?"  # answered by the AI from a seed article


@pytest.fixture
def smtp():
    """A running SMTP server on 127.0.0.1 that refuses UNKNOWN_MAILBOX with a 550."""
    with SmtpSink(refused=(UNKNOWN_MAILBOX,)) as sink:
        yield sink


@pytest.fixture
def mailing(seeded, smtp):
    """The test runtime sending to ``smtp``."""
    seeded.settings = dataclasses.replace(
        seeded.settings, smtp_host="127.0.0.1", smtp_port=smtp.port, mail_from=SENDER,
        mail_reply_to="support+{token}@example.com", public_url="https://help.example.com")
    return seeded


def deliver(runtime) -> Delivery:
    """One worker pass over the real SMTP server."""
    return deliver_due_mail(runtime.session, runtime.settings, SmtpTransport(runtime.settings, timeout=5))


def handed_off(client, email: str = "alice@example.com") -> int:
    """A ticket the AI handed to an agent (so it is acknowledged by e-mail)."""
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF, "email": email})
    assert created.status_code == 201, created.get_data(as_text=True)
    assert created.get_json()["ticket"]["status"] == "needs_agent"
    return created.get_json()["ticket"]["id"]


class PickyTransport:
    """Sends everything except to ``bad``, for which it raises ValueError (a bug, not an SMTP error)."""

    def __init__(self, bad: str | None = None) -> None:
        self.bad, self.sent = bad, []

    def send(self, message) -> None:
        if message["To"] == self.bad:
            raise ValueError("cannot encode this one")
        self.sent.append(str(message["To"]))


def _queue(runtime, *addresses: str, prefix: str = "row") -> None:
    with runtime.session() as session:
        session.add_all(MailOutbox(to_address=a, subject="s", body="b", message_id=f"<{prefix}{n}@example.com>")
                        for n, a in enumerate(addresses))


def test_item_6_a_row_that_raises_is_recorded_and_the_next_rows_still_go(runtime, session):
    _queue(runtime, "c0@example.com", "c1@example.com", "c2@example.com", prefix="iso")
    transport = PickyTransport(bad="c1@example.com")
    outcome = deliver_due_mail(runtime.session, runtime.settings, transport)
    assert transport.sent == ["c0@example.com", "c2@example.com"]
    assert outcome == Delivery(sent=2, failed=1, gave_up=0)
    row = session.scalar(sa.select(MailOutbox).where(MailOutbox.message_id == "<iso1@example.com>"))
    assert (row.sent_at, row.failed_at, row.locked_until, row.attempts) == (None, None, None, 1)
    assert row.last_error == "ValueError: cannot encode this one"


def test_item_6_an_invalid_address_fails_at_once(runtime, session):
    _queue(runtime, "not an address", "c1@example.com", prefix="bad")
    outcome = deliver_due_mail(runtime.session, runtime.settings, PickyTransport())
    assert outcome == Delivery(sent=1, failed=0, gave_up=1)
    row = session.scalar(sa.select(MailOutbox).where(MailOutbox.message_id == "<bad0@example.com>"))
    assert row.failed_at is not None and row.last_error.startswith("InvalidAddress: ")


def test_item_6_the_worker_thread_survives_any_exception(runtime):
    _queue(runtime, "c0@example.com", prefix="survive")
    transport = PickyTransport()

    class FirstPassBreaks:
        """The runtime as the worker sees it; its first session raises a bug outside any one e-mail."""

        settings, calls = runtime.settings, 0

        def session(self):
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("a bug outside any one e-mail")
            return runtime.session()

    worker = MailWorker(FirstPassBreaks(), transport, interval=0.05).start()
    try:
        deadline = time.monotonic() + 10
        while not transport.sent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker._thread.is_alive()
    finally:
        worker.stop()
    assert transport.sent == ["c0@example.com"]


def test_item_6_a_550_fails_at_once_shows_failed_with_the_reason_and_can_be_retried(mailing, smtp, client):
    ticket_id = handed_off(client, UNKNOWN_MAILBOX)
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "We ship to Earth only."}).get_json()
    assert deliver(mailing) == Delivery(sent=0, failed=0, gave_up=2)  # the acknowledgement and the reply
    assert deliver(mailing) == Delivery(sent=0, failed=0, gave_up=0)  # never tried again by itself
    messages = client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"]
    [shown] = [m for m in messages if m["id"] == reply["message"]["id"]]
    assert shown["email"] == "failed"
    assert "550" in shown["email_error"] and "User unknown" in shown["email_error"]
    retried = client.post(f"/api/mail/outbox/{shown['email_outbox_id']}/retry")
    assert retried.status_code == 200
    assert retried.get_json()["mail"] | {"error": None} == {
        "id": shown["email_outbox_id"], "status": "queued", "attempts": 0, "error": None, "to": UNKNOWN_MAILBOX}
    assert_error(client.post(f"/api/mail/outbox/{shown['email_outbox_id']}/retry"), 409, "conflict")
    assert_error(client.post("/api/mail/outbox/987654321/retry"), 404, "not_found")
    assert deliver(mailing) == Delivery(sent=0, failed=0, gave_up=1)  # still no such mailbox


def test_item_6_temporary_failures_give_up_after_mail_max_attempts(mailing, smtp, client, session):
    mailing.settings = dataclasses.replace(mailing.settings, mail_max_attempts=2)
    ticket_id = handed_off(client)
    smtp.stop()
    assert deliver(mailing) == Delivery(sent=0, failed=1, gave_up=0)
    session.execute(sa.update(MailOutbox).where(MailOutbox.ticket_id == ticket_id)
                    .values(next_attempt_at=sa.func.now()))
    session.commit()
    assert deliver(mailing) == Delivery(sent=0, failed=0, gave_up=1)
    row = session.scalar(sa.select(MailOutbox).where(MailOutbox.ticket_id == ticket_id)
                         .execution_options(populate_existing=True))
    assert row.failed_at is not None and row.attempts == 2 and "Connection refused" in row.last_error


def test_item_6_the_default_gives_up_after_about_a_day():
    assert 23 * 3600 <= retry_span_seconds(Settings().mail_max_attempts) <= 25 * 3600


@pytest.mark.parametrize("error, permanent", [
    (smtplib.SMTPRecipientsRefused({"a@x.test": (550, b"5.1.1 User unknown")}), True),
    (smtplib.SMTPRecipientsRefused({"a@x.test": (450, b"4.2.0 Greylisted")}), False),
    (smtplib.SMTPDataError(554, b"5.7.1 Message rejected"), True),
    (smtplib.SMTPDataError(451, b"4.3.0 Try again later"), False),
    (smtplib.SMTPSenderRefused(553, b"5.7.1 Not our sender", "support@example.com"), False),  # our settings
    (smtplib.SMTPAuthenticationError(535, b"5.7.8 Bad credentials"), False),  # our settings
    (InvalidAddress("not an address"), True),
    (ConnectionRefusedError(111, "Connection refused"), False),
    (smtplib.SMTPServerDisconnected("Connection unexpectedly closed"), False),
    (ValueError("a bug"), False),
])
def test_item_6_which_failures_are_permanent(error, permanent):
    assert classify_failure(error).permanent is permanent


def test_item_6_failed_mail_shows_in_the_workspace_with_a_retry_button_and_on_the_dashboard(
        mailing, smtp, client, admin_client, session):
    ticket_id = handed_off(client, UNKNOWN_MAILBOX)
    assert deliver(mailing).gave_up == 1
    page = admin_client.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    assert "E-mail not delivered" in page and "User unknown" in page
    outbox_id = session.scalar(sa.select(MailOutbox.id).where(MailOutbox.ticket_id == ticket_id))
    assert f"/admin/inbox/{ticket_id}/mail/{outbox_id}/retry" in page
    dashboard = admin_client.get("/admin/dashboard").get_data(as_text=True)
    assert 'id="mail-failed-count">1<' in dashboard
    retried = admin_client.post(f"/admin/inbox/{ticket_id}/mail/{outbox_id}/retry",
                                data={"csrf_token": csrf_from(page)})
    assert retried.status_code == 302
    assert session.scalar(sa.select(MailOutbox.failed_at).where(MailOutbox.id == outbox_id)
                          .execution_options(populate_existing=True)) is None
    assert 'id="mail-failed-count">0<' in admin_client.get("/admin/dashboard").get_data(as_text=True)


def test_item_6_mail_status_lists_failed_mail_and_mail_retry_queues_it_again(db_engine, cli_env):
    upgrade_database(db_engine)
    with db_engine.begin() as conn:
        conn.execute(sa.insert(MailOutbox).values(to_address=UNKNOWN_MAILBOX, subject="s", body="b", attempts=1,
                                                  message_id="<cli@example.com>", failed_at=sa.func.now(),
                                                  last_error="recipient refused: 550 User unknown"))
        outbox_id = conn.scalar(sa.select(MailOutbox.id))
    runner = CliRunner()
    status = runner.invoke(main, ["mail", "status"])
    assert status.exit_code == 0, status.output
    assert "queued 0, sending 0, failed 1" in status.output
    assert f"failed #{outbox_id} no ticket to {UNKNOWN_MAILBOX}" in status.output
    assert "550 User unknown" in status.output
    assert runner.invoke(main, ["mail", "retry", str(outbox_id)]).exit_code == 0
    assert "queued 1, sending 0, failed 0" in runner.invoke(main, ["mail", "status"]).output
    again = runner.invoke(main, ["mail", "retry", str(outbox_id)])
    assert again.exit_code == 1 and "is queued, not failed" in again.output


def test_item_7_an_anonymous_ticket_the_ai_answered_sends_no_email(mailing, anonymous_client, session):
    created = anonymous_client.post("/api/tickets", json={"subject": "Cheap watches here", "body": ANSWERED,
                                                          "email": "victim@example.com"})
    assert created.status_code == 201 and created.get_json()["ticket"]["status"] == "answered"
    assert session.scalar(sa.select(sa.func.count()).select_from(MailOutbox)) == 0


def test_item_7_acknowledgements_to_one_address_are_capped_per_hour(mailing, anonymous_client, session):
    mailing.settings = dataclasses.replace(mailing.settings, mail_ack_per_address_per_hour=2)
    for address in ("victim@example.com", "Victim@Example.com", "VICTIM@example.com"):
        created = anonymous_client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                              "email": address})
        assert created.status_code == 201
    assert session.scalar(sa.select(sa.func.count()).select_from(MailOutbox)) == 2


def _agent(session, username: str, display_name: str | None) -> int:
    user_id = create_admin(session, username, "correct horse battery", role="agent").id
    session.get(AdminUser, user_id).display_name = display_name
    return user_id


def test_item_8_date_message_id_auto_submitted_and_the_agents_display_name(mailing, smtp, client):
    ticket_id = handed_off(client)
    with mailing.session() as session:
        dana = _agent(session, "dana.k", "Dana from Support")
        nameless = _agent(session, "root.agent", None)
        send_reply(session, mailing.settings, ticket_id, {"body": "First."}, agent=Actor("agent", dana))
        send_reply(session, mailing.settings, ticket_id, {"body": "Second."}, agent=Actor("agent", nameless))
    assert deliver(mailing).sent == 3
    sent = smtp.wait_for(3)
    [ack] = [m for m in sent if m["Auto-Submitted"] == "auto-replied"]
    [first] = [m for m in sent if "First." in m.get_content()]
    [second] = [m for m in sent if "Second." in m.get_content()]
    for message in (ack, first, second):
        assert abs((parsedate_to_datetime(message["Date"]) - datetime.now(timezone.utc)).total_seconds()) < 600
        assert message["Message-ID"].startswith("<") and message["Message-ID"].endswith("@example.com>")
    assert first["Auto-Submitted"] is None and second["Auto-Submitted"] is None
    assert (first["From"].addresses[0].display_name, first["From"].addresses[0].addr_spec) == (
        "Dana from Support", "support@example.com")
    assert second["From"].addresses[0].display_name == "Support" and "root.agent" not in str(second["From"])
    assert f"https://help.example.com/help/tickets/{ticket_id}" in first.get_content()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_reply_attachments_are_stored_and_sent_as_mime_parts(mailing, smtp, client, session):
    ticket_id = handed_off(client)
    pdf = b"%PDF-1.4\n\x00\xff binary invoice " * 20
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "See the invoice.", "attachments": [
        {"filename": "../../invoice.pdf", "content_type": "application/pdf", "content_base64": _b64(pdf)}]})
    assert reply.status_code == 201, reply.get_data(as_text=True)
    assert reply.get_json()["attachments"] == 1
    [stored] = session.scalars(sa.select(TicketAttachment)).all()
    assert (stored.message_id, stored.filename, stored.content_type, stored.size, stored.sha256) == (
        reply.get_json()["message"]["id"], "invoice.pdf", "application/pdf", len(pdf), hashlib.sha256(pdf).hexdigest())
    assert deliver(mailing).sent == 2
    [sent] = [m for m in smtp.wait_for(2) if m["Auto-Submitted"] is None]
    [part] = list(sent.iter_attachments())
    assert (part.get_filename(), part.get_content_type(), part.get_content()) == ("invoice.pdf", "application/pdf", pdf)
    assert "See the invoice." in sent.get_body(preferencelist=("plain",)).get_content()


@pytest.mark.parametrize("files, field", [
    ([{"filename": "big.bin", "content_base64": _b64(b"x" * 11)}], "attachments[0]"),
    ([{"filename": "a.txt", "content_base64": "not base64!"}], "attachments[0].content_base64"),
    ([{"filename": f"{n}.txt", "content_base64": _b64(b"x")} for n in range(4)], "attachments"),
    ([{"filename": "a.txt", "content_base64": _b64(b"x"), "path": "/etc/passwd"}], "attachments[0].path"),
])
def test_reply_attachments_out_of_bounds_get_a_clear_400_and_store_nothing(mailing, client, session, files, field):
    mailing.settings = dataclasses.replace(mailing.settings, reply_attachment_max_bytes=10,
                                           reply_attachments_max_bytes=10, reply_attachments_max_files=3)
    ticket_id = handed_off(client)
    response = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Files.", "attachments": files})
    assert field in assert_error(response, 400, "validation_error")["details"]
    assert session.scalar(sa.select(sa.func.count()).select_from(TicketAttachment)) == 0


def test_reply_attachments_from_the_workspace_composer(mailing, client, admin_client, session):
    ticket_id = handed_off(client)
    page = admin_client.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    assert 'type="file" name="attachments"' in page and 'enctype="multipart/form-data"' in page
    sent = admin_client.post(f"/admin/inbox/{ticket_id}/reply", content_type="multipart/form-data", data={
        "csrf_token": csrf_from(page), "body": "Here is the label.", "status": "pending",
        "attachments": [(io.BytesIO(b"label bytes"), "label.png", "image/png")]})
    assert sent.status_code == 302
    [stored] = session.scalars(sa.select(TicketAttachment)).all()
    assert (stored.filename, stored.content_type, stored.size) == ("label.png", "image/png", len(b"label bytes"))
