"""Erasure of tickets that came in by the real channels (issue 36): `mail pipe` and the IMAP poller on Dovecot."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy.orm import Session

from service.cli.main import main
from service.intake.imap_poller import ImapPoller

from .helpers import run_cli_json
from .test_imap import imap, mailbox  # noqa: F401 - fixtures
from .test_mail_inbound import email_bytes
from .test_privacy_erase import scan

ADDRESS = "dana.marrowfinch@example.com"
WORDS = ["quillbrook", "fennelspire"]
FILE = b"\x89DANA\x00\xfe-marrowfinch-file"


def _raw(n: int) -> bytes:
    return email_bytes(sender=f"Dana <{ADDRESS}>", subject=f"Help with {WORDS[0]}", message_id=f"<dana-{n}@c.test>",
                       body=f"My {WORDS[1]} is broken.", attachments=[("scan.bin", "application/octet-stream", FILE)])


def test_a_ticket_made_by_mail_pipe_is_erased_without_a_trace(db_engine):
    result = CliRunner().invoke(main, ["mail", "pipe"], input=_raw(1))
    assert result.exit_code == 0 and '"new_ticket"' in result.output, result.output
    with Session(db_engine) as session:
        assert scan(session, [ADDRESS, *WORDS], [FILE])
    assert run_cli_json("customer", "erase", "--email", ADDRESS)["counts"]["tickets"] == 1
    with Session(db_engine) as session:
        assert scan(session, [ADDRESS, *WORDS], [FILE]) == []


def test_a_ticket_fetched_over_imap_is_erased_without_a_trace(imap, mailbox, client, session):  # noqa: F811
    mail_client, folder = mailbox
    mail_client.append(folder, _raw(2))
    assert ImapPoller(imap).run_once().outcomes == {"new_ticket": 1}
    assert scan(session, [ADDRESS, *WORDS], [FILE])
    erased = client.post("/api/customers/erase", json={"email": ADDRESS, "confirm": ADDRESS}).get_json()
    assert erased["counts"]["tickets"] == 1 and erased["counts"]["raw_mail"] == 1
    session.expire_all()
    assert scan(session, [ADDRESS, *WORDS], [FILE]) == []
