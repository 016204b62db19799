"""IMAP intake (issue 24 item 9) against a real Dovecot on loopback: each message taken exactly once."""

from __future__ import annotations

import dataclasses
import json
import ssl
import time
import uuid
from pathlib import Path
from email.message import EmailMessage
from email.utils import make_msgid

import pytest
import sqlalchemy as sa
from imapclient import IMAPClient
from imapclient.imapclient import SEEN

from service.config import ConfigError, Settings
from service.db.engine import create_engine
from service.db.models import ImapFolder, Ticket, TicketMessage
from service.intake.imap import account_key, connect_mailbox
from service.intake.imap_poller import ImapPoller, backoff_seconds
from service.runtime import Runtime

from .helpers import run_cli
from .imap_server import REQUIRE_VARIABLE, DovecotServer, free_port, require_dovecot


def build_message(subject: str, *, sender: str = "carol@example.com", body: str | None = None) -> bytes:
    """A customer's e-mail with a fresh Message-ID."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, "support@example.com", subject
    message["Message-ID"] = make_msgid(domain="customer.example")
    message.set_content(body or f"Hello, about {subject.lower()}: how do I do that?")
    return message.as_bytes()


@pytest.fixture
def mailbox(dovecot):
    """A logged-in IMAP client (the customer's side, delivering by APPEND) and a folder of this test's own."""
    client = IMAPClient(dovecot.host, port=dovecot.port, ssl=False, timeout=10)
    client.login(dovecot.username, dovecot.password)
    folder = f"support-{uuid.uuid4().hex[:8]}"
    client.create_folder(folder)
    yield client, folder
    try:
        client.logout()
    except Exception:  # a test stopped the server under this connection
        pass


@pytest.fixture
def imap(runtime, dovecot, mailbox):
    """The test runtime fetching from the test's folder (no TLS: the server is on loopback)."""
    runtime.settings = dataclasses.replace(
        runtime.settings, imap_host=dovecot.host, imap_port=dovecot.port, imap_username=dovecot.username,
        imap_password=dovecot.password, imap_tls=False, imap_folder=mailbox[1])
    return runtime


def deliver(mailbox, *subjects: str, flags: tuple = ()) -> list[bytes]:
    """APPEND one message per subject to the test's folder; returns the raw messages."""
    client, folder = mailbox
    raws = [build_message(subject) for subject in subjects]
    for raw in raws:
        client.append(folder, raw, flags=flags)
    return raws


def folder_flags(mailbox, folder: str | None = None) -> dict[int, tuple]:
    """UID → flags of every message in the folder, as the server has them."""
    client, own = mailbox
    client.select_folder(folder or own, readonly=True)
    uids = client.search(["ALL"])
    return {uid: data[b"FLAGS"] for uid, data in client.fetch(uids, ["FLAGS"]).items()} if uids else {}


def email_tickets(runtime) -> dict[str, int]:
    """Message-ID → ticket id of every message that came in by e-mail."""
    with runtime.session() as session:
        rows = session.execute(sa.select(TicketMessage.email_message_id, TicketMessage.ticket_id)
                               .where(TicketMessage.email_message_id.is_not(None))).all()
    return dict(rows)


def message_id(raw: bytes) -> str:
    """The Message-ID header of a raw message."""
    return next(line.split(b": ", 1)[1].decode() for line in raw.splitlines() if line.startswith(b"Message-ID"))


def place(runtime) -> ImapFolder:
    """The stored progress of the test's folder."""
    with runtime.session() as session:
        return session.get(ImapFolder, (account_key(runtime.settings), runtime.settings.imap_folder))


def test_new_messages_become_tickets_once_and_are_flagged_seen(imap, mailbox):
    raws = deliver(mailbox, "Parrot food", "Lost password", "Invoice copy")
    report = ImapPoller(imap).run_once()
    assert (report.fetched, report.outcomes, report.failed) == (3, {"new_ticket": 3}, 0)
    tickets = email_tickets(imap)
    assert set(tickets) == {message_id(raw) for raw in raws} and len(set(tickets.values())) == 3
    with imap.session() as session:
        subjects = set(session.scalars(sa.select(Ticket.subject).where(Ticket.id.in_(tickets.values()))))
    assert subjects == {"Parrot food", "Lost password", "Invoice copy"}
    assert all(SEEN in flags for flags in folder_flags(mailbox).values())
    assert ImapPoller(imap).run_once().fetched == 0
    assert place(imap).last_uid == 3 and len(email_tickets(imap)) == 3


def test_a_restarted_poller_takes_only_what_came_in_since(imap, mailbox):
    deliver(mailbox, "First question")
    assert ImapPoller(imap).run_once().outcomes == {"new_ticket": 1}
    deliver(mailbox, "Second question")
    # A new poller, as after a restart: it knows only what the database says.
    report = ImapPoller(imap).run_once()
    assert (report.fetched, report.outcomes) == (1, {"new_ticket": 1})
    assert len(email_tickets(imap)) == 2 and place(imap).last_uid == 2


def test_a_crash_between_storing_and_recording_makes_no_second_ticket(imap, mailbox):
    deliver(mailbox, "Stored, then the process died")
    ImapPoller(imap).run_once()
    # What a crash after the ticket's commit, before the UID's, leaves behind: UID not recorded, message unread.
    with imap.session() as session:
        session.get(ImapFolder, (account_key(imap.settings), imap.settings.imap_folder)).last_uid = 0
    client, folder = mailbox
    client.select_folder(folder)
    client.remove_flags([1], [SEEN])
    report = ImapPoller(imap).run_once()
    assert (report.fetched, report.outcomes) == (1, {"duplicate": 1})
    assert len(email_tickets(imap)) == 1 and place(imap).last_uid == 1


def test_seen_policy_skips_mail_read_before_the_service_but_not_mail_read_after(imap, mailbox):
    deliver(mailbox, "Read by a person long ago", flags=(SEEN,))
    unread = deliver(mailbox, "Never read")
    assert ImapPoller(imap).run_once().outcomes == {"new_ticket": 1}
    assert set(email_tickets(imap)) == {message_id(unread[0])}
    # From then on the UID decides: a person reading a new message in webmail first does not hide it.
    read_early = deliver(mailbox, "Opened in webmail before the poller came", flags=(SEEN,))
    assert ImapPoller(imap).run_once().outcomes == {"new_ticket": 1}
    assert message_id(read_early[0]) in email_tickets(imap)


def test_processed_folder_policy_moves_taken_messages_read_or_not(imap, mailbox):
    processed = f"{imap.settings.imap_folder}-done"
    imap.settings = dataclasses.replace(imap.settings, imap_processed_folder=processed)
    deliver(mailbox, "Move me", "Move me too", flags=(SEEN,))  # this policy takes read mail as well
    report = ImapPoller(imap).run_once()
    assert report.outcomes == {"new_ticket": 2}
    assert folder_flags(mailbox) == {}
    moved = folder_flags(mailbox, processed)
    assert len(moved) == 2 and len(email_tickets(imap)) == 2


def test_processed_folder_policy_moves_a_message_taken_just_before_a_crash_without_taking_it_again(imap, mailbox):
    processed = f"{imap.settings.imap_folder}-done"
    imap.settings = dataclasses.replace(imap.settings, imap_processed_folder=processed)
    deliver(mailbox, "Recorded, then the process died before the move")
    client, folder = mailbox
    uidvalidity = client.folder_status(folder, [b"UIDVALIDITY"])[b"UIDVALIDITY"]
    with imap.session() as session:  # the state that crash leaves: UID 1 recorded, the message still there
        session.add(ImapFolder(account=account_key(imap.settings), folder=folder, uidvalidity=uidvalidity,
                               last_uid=1, baseline_uid=0))
    report = ImapPoller(imap).run_once()
    assert report.fetched == 0 and email_tickets(imap) == {}
    assert folder_flags(mailbox) == {} and len(folder_flags(mailbox, processed)) == 1


def test_a_new_uidvalidity_rescans_the_folder_and_the_dedupe_drops_what_was_taken(imap, mailbox, dovecot):
    deliver(mailbox, "Before the rebuild", "Also before")
    first = ImapPoller(imap).run_once()
    client, folder = mailbox
    old_validity = first.uidvalidity
    dovecot.set_uidvalidity(folder, old_validity + 1000)
    # The rebuilt mailbox came back from a backup with its flags lost, plus one new message.
    client.select_folder(folder)
    client.remove_flags(client.search(["ALL"]), [SEEN])
    client.unselect_folder()
    new = deliver(mailbox, "After the rebuild")
    report = ImapPoller(imap).run_once()
    assert report.reset and report.uidvalidity == old_validity + 1000
    assert (report.fetched, report.outcomes) == (3, {"duplicate": 2, "new_ticket": 1})
    assert len(email_tickets(imap)) == 3 and message_id(new[0]) in email_tickets(imap)
    assert (place(imap).uidvalidity, place(imap).last_uid) == (old_validity + 1000, 3)


POISON_TRIGGER = """
CREATE FUNCTION pg_temp.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.body LIKE '%POISON%' THEN RAISE EXCEPTION 'this message breaks the intake'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON tickets FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_poison();
"""


def test_a_message_the_intake_cannot_turn_into_a_ticket_is_quarantined_once_and_the_rest_still_come_in(
        imap, mailbox, dovecot):
    client, folder = mailbox
    client.append(folder, build_message("Breaks things", body="POISON in the body"))
    after = deliver(mailbox, "Comes in after the bad one")
    with imap.session() as session:  # a real database error on that message only, inside the test transaction
        session.execute(sa.text(POISON_TRIGGER))
    report = ImapPoller(imap).run_once()
    # The intake stores the raw message before it reads it, so the poison one waits in the quarantine
    # (/admin/mail) instead of being retried against the mailbox; the one after it still makes its ticket.
    assert (report.fetched, report.failed, report.outcomes) == (2, 0, {"quarantined": 1, "new_ticket": 1})
    assert set(email_tickets(imap)) == {message_id(after[0])}
    with imap.session() as session:
        reasons = session.execute(sa.text(
            "SELECT reason FROM inbound_emails WHERE status = 'quarantined'")).scalars().all()
    assert len(reasons) == 1 and "breaks the intake" in reasons[0]
    assert ImapPoller(imap).run_once().fetched == 0  # taken once: progress was recorded after the quarantine


def test_imap_down_backs_off_then_recovers_and_nothing_is_lost(imap, mailbox, dovecot):
    raws = deliver(mailbox, "Sent while the mail server was about to go down")
    poller = ImapPoller(imap, interval=7.0, backoff_base=0.5, backoff_max=1.5)
    dovecot.stop()
    try:
        delays = [poller.step() for _ in range(4)]
        assert delays == [0.5, 1.0, 1.5, 1.5] and poller.failures == 4
        assert "ConnectionRefusedError" in poller.last_error
        assert email_tickets(imap) == {}
    finally:
        dovecot.start()
    try:
        assert poller.step() == 7.0 and poller.failures == 0 and poller.last_error is None
        assert poller.last_report.outcomes == {"new_ticket": 1}
    finally:
        poller.lock.release()
    assert set(email_tickets(imap)) == {message_id(raws[0])}


def test_mail_fetch_once_reports_json_exits_75_while_the_server_is_down_and_1_on_a_refused_login(
        cli_env, db_engine, dovecot, mailbox, monkeypatch):
    raws = deliver(mailbox, "Asked through the command line")
    for name, value in {"IMAP_HOST": dovecot.host, "IMAP_PORT": str(dovecot.port), "IMAP_TLS": "false",
                        "IMAP_USERNAME": dovecot.username, "IMAP_PASSWORD": "wrong", "IMAP_FOLDER": mailbox[1],
                        "SUPPORTRAG_AUTO_SEED": "0"}.items():
        monkeypatch.setenv(name, value)
    refused = run_cli("mail", "fetch", "--once", expect_success=False)
    assert refused.exit_code == 1 and "refused the login" in refused.output and "IMAP_PASSWORD" in refused.output
    monkeypatch.setenv("IMAP_PASSWORD", dovecot.password)
    dovecot.stop()
    try:
        down = run_cli("mail", "fetch", "--once", expect_success=False)
    finally:
        dovecot.start()
    assert down.exit_code == 75 and "try again later" in down.output
    report = json.loads(run_cli("mail", "fetch", "--once").stdout)
    assert (report["fetched"], report["outcomes"]) == (1, {"new_ticket": 1})
    assert json.loads(run_cli("mail", "fetch", "--once").stdout)["fetched"] == 0
    with db_engine.connect() as connection:
        stored = connection.scalars(sa.select(TicketMessage.email_message_id)
                                    .where(TicketMessage.email_message_id.is_not(None))).all()
    assert stored == [message_id(raws[0])]


def test_the_poller_loop_survives_a_database_that_is_down_and_backs_off(imap, local_embedder):
    down = create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/gone", pool_size=1)
    poller = ImapPoller(Runtime(imap.settings, down, local_embedder), interval=30.0, backoff_base=0.01,
                        backoff_max=0.02)
    try:
        assert poller.step() == 0.01 and "OperationalError" in poller.last_error
        poller.start()
        deadline = time.monotonic() + 10
        while poller.failures < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert poller.failures >= 5 and poller._thread.is_alive()
    finally:
        poller.stop()
        down.dispose()
    assert not poller._thread.is_alive()


def test_one_poller_fetches_per_deployment(imap):
    first, second = ImapPoller(imap), ImapPoller(imap)
    try:
        assert first.lock.hold() and not second.lock.hold()
        first.lock.release()
        assert second.lock.hold()
    finally:
        first.lock.release()
        second.lock.release()


def test_imap_tls_on_another_port_than_993_upgrades_with_starttls_and_verifies_the_certificate(
        dovecot, settings, monkeypatch):
    server = DovecotServer(tls=True).start()
    try:
        tls = dataclasses.replace(settings, imap_host=server.host, imap_port=server.port, imap_tls=True,
                                  imap_username=server.username, imap_password=server.password)
        with pytest.raises(ssl.SSLCertVerificationError):  # self-signed and not trusted: refused, never sent
            connect_mailbox(tls, timeout=10)
        monkeypatch.setenv("SSL_CERT_FILE", str(server.certificate))  # OpenSSL's default trust store, for now
        client = connect_mailbox(tls, timeout=10)
        try:
            assert client.socket().version().startswith("TLS") and client.list_folders()
        finally:
            client.logout()
    finally:
        server.close()


@pytest.mark.parametrize("failures, expected", [(1, 5.0), (2, 10.0), (3, 20.0), (8, 640.0), (9, 900.0)])
def test_backoff_doubles_up_to_fifteen_minutes(failures, expected):
    assert backoff_seconds(failures) == expected


def test_imap_settings_are_read_from_the_environment():
    settings = Settings.from_env({"IMAP_HOST": "imap.example.com", "IMAP_USERNAME": "support@example.com",
                                  "IMAP_PASSWORD": "app-password", "IMAP_PROCESSED_FOLDER": "Done",
                                  "IMAP_TLS": "false", "IMAP_PORT": "143", "IMAP_POLL_SECONDS": "30"})
    assert (settings.imap_host, settings.imap_port, settings.imap_tls, settings.imap_folder,
            settings.imap_processed_folder, settings.imap_poll_seconds) == ("imap.example.com", 143, False, "INBOX",
                                                                            "Done", 30.0)
    assert "app-password" not in repr(settings)
    defaults = Settings.from_env({})
    assert (defaults.imap_host, defaults.imap_port, defaults.imap_tls) == (None, 993, True)


@pytest.mark.parametrize("env, message", [
    ({"IMAP_HOST": "imap.example.com"}, "IMAP_USERNAME"),
    ({"IMAP_TLS": "maybe"}, "IMAP_TLS"),
    ({"IMAP_PORT": "0"}, "IMAP_PORT"),
    ({"IMAP_POLL_SECONDS": "0"}, "IMAP_POLL_SECONDS"),
    ({"IMAP_PROCESSED_FOLDER": "INBOX"}, "IMAP_PROCESSED_FOLDER"),
])
def test_bad_imap_settings_are_refused_with_the_setting_named(env, message):
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_without_dovecot_the_imap_tests_skip_saying_why_and_ci_makes_that_a_failure():
    with pytest.raises(pytest.skip.Exception, match="apt-get install dovecot-imapd"):
        require_dovecot(False, {})
    with pytest.raises(pytest.fail.Exception, match="dovecot-imapd"):
        require_dovecot(False, {REQUIRE_VARIABLE: "1"})
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert f"export {REQUIRE_VARIABLE}=1" in ci and "apt-get install -y dovecot-imapd" in ci


def test_a_message_over_inbound_raw_max_bytes_is_read_capped_stored_truncated_and_quarantined(imap, mailbox):
    imap.settings = dataclasses.replace(imap.settings, inbound_raw_max_bytes=4096)
    client, folder = mailbox
    big = build_message("Huge", body="x" * 20_000)
    client.append(folder, big)
    after = deliver(mailbox, "Comes in after the big one")
    report = ImapPoller(imap).run_once()
    assert (report.fetched, report.failed, report.outcomes) == (2, 0, {"quarantined": 1, "new_ticket": 1})
    assert set(email_tickets(imap)) == {message_id(after[0])}
    with imap.session() as session:
        row = session.execute(sa.text("SELECT size, raw_truncated, length(raw) AS kept, reason FROM inbound_emails "
                                      "WHERE status = 'quarantined'")).one()
    assert row.raw_truncated and row.kept == 4096 and row.size >= len(big) and "INBOUND_RAW_MAX_BYTES" in row.reason
