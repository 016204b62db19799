"""Issue 32 leftovers: a certificate the IMAP poller cannot verify is listed on /admin/mail ("IMAP: … certificate
verify failed …, retrying") until a pass succeeds, and never downgraded. A real Dovecot with a self-signed
certificate on loopback, the real PostgreSQL."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import ImapFolder
from service.intake.imap import account_key
from service.intake.imap_poller import ImapPoller
from service.intake.imap_status import poll_problems

from .helpers import run_cli
from .imap_server import DovecotServer, dovecot_usable, require_dovecot


def _mail_page(admin_client) -> str:
    response = admin_client.get("/admin/mail")
    assert response.status_code == 200
    return response.get_data(as_text=True)


def test_an_unverified_imap_certificate_is_listed_on_admin_mail_until_a_pass_succeeds(runtime, admin_client,
                                                                                       session):
    require_dovecot(dovecot_usable())
    server = DovecotServer(tls=True).start()
    try:
        runtime.settings = dataclasses.replace(
            runtime.settings, imap_host=server.host, imap_port=server.port, imap_tls=True, imap_folder="INBOX",
            imap_username=server.username, imap_password=server.password, smtp_ca_file=None)
        poller = ImapPoller(runtime, backoff_base=0.01, timeout=10)
        try:
            assert poller.step() == 0.01 and poller.step() == 0.02  # failed, and backing off
            assert poller.failures == 2 and "certificate verify failed" in poller.last_error
            page = _mail_page(admin_client)
            assert "IMAP: SSLCertVerificationError" in page and "certificate verify failed" in page
            assert ", retrying" in page and "2 failed passes" in page and "INBOX of support@127.0.0.1" in page
            assert "Login: user=" not in server.log()  # the password never went over an unverified connection

            runtime.settings = dataclasses.replace(runtime.settings, smtp_ca_file=str(server.certificate))
            assert poller.step() == poller.interval and poller.failures == 0
        finally:
            poller.lock.release()
        assert "Login: user=" in server.log()  # verified against the named CA: the same TLS, now trusted
        assert poll_problems(session) == [] and "IMAP:" not in _mail_page(admin_client)
        row = session.scalar(sa.select(ImapFolder).where(ImapFolder.account == account_key(runtime.settings)))
        assert row.uidvalidity is not None and row.poll_error is None and row.poll_failures == 0
    finally:
        server.close()


def test_a_failure_after_the_folder_was_read_keeps_its_place_and_counts_since_the_first(runtime, session):
    runtime.settings = dataclasses.replace(runtime.settings, imap_host="127.0.0.1", imap_port=9, imap_tls=False,
                                           imap_folder="Support", imap_username="support")
    account = account_key(runtime.settings)
    session.add(ImapFolder(account=account, folder="Support", uidvalidity=7, last_uid=41, baseline_uid=3))
    session.commit()
    poller = ImapPoller(runtime, backoff_base=0.01, timeout=5)
    try:
        poller.step()
        first = poll_problems(session)
        poller.step()
    finally:
        poller.lock.release()
    problems = poll_problems(session)
    assert len(problems) == 1 and problems[0].failures == 2 and problems[0].since == first[0].since
    assert problems[0].summary.startswith("IMAP: ConnectionRefusedError") and problems[0].retry_at is not None
    session.expire_all()
    row = session.get(ImapFolder, (account, "Support"))
    assert (row.uidvalidity, row.last_uid, row.baseline_uid) == (7, 41, 3)  # the place is never touched


def test_mail_fetch_once_from_cron_records_the_certificate_failure_and_clears_it(cli_env, db_engine, monkeypatch):
    require_dovecot(dovecot_usable())
    server = DovecotServer(tls=True).start()
    try:
        for name, value in {"IMAP_HOST": server.host, "IMAP_PORT": str(server.port), "IMAP_TLS": "true",
                            "IMAP_USERNAME": server.username, "IMAP_PASSWORD": server.password,
                            "SUPPORTRAG_AUTO_SEED": "0"}.items():
            monkeypatch.setenv(name, value)
        for _ in range(2):
            failed = run_cli("mail", "fetch", "--once", expect_success=False)
            assert failed.exit_code == 75 and "certificate verify failed" in failed.output
        with Session(db_engine) as session:
            [problem] = poll_problems(session)
        assert problem.failures == 2 and "certificate verify failed" in problem.summary and problem.retry_at is None
        assert "Login: user=" not in server.log()
        monkeypatch.setenv("SMTP_CA_FILE", str(server.certificate))
        run_cli("mail", "fetch", "--once")
        with Session(db_engine) as session:
            assert poll_problems(session) == []
    finally:
        server.close()
