"""``supportrag mail …``: deliver an e-mail from the mail server (pipe) and send the outbox (worker)."""

from __future__ import annotations

import json
import sys
from urllib.parse import quote

import click
from sqlalchemy.exc import SQLAlchemyError

from service.cli.context import connect
from service.config import ConfigError, Settings
from service.intake.receive import receive_email
from service.mail.worker import MailWorker

EX_TEMPFAIL = 75  # sysexits.h: Postfix and Exim keep the message and retry later


@click.group()
def mail() -> None:
    """E-mail in and out (see docs/email.md)."""


def _ticket_link(settings: Settings):
    base = settings.public_url or f"http://{settings.host}:{settings.port}"
    return lambda ticket_id, key: f"{base}/help/tickets/{ticket_id}?key={quote(key)}"


@mail.command("pipe")
def pipe() -> None:
    """Read one RFC 5322 message on stdin (Postfix/Exim "deliver to a command"); print what was done as JSON.

    Exits 0 once the message is stored and its outcome recorded (a quarantine included), 75 (EX_TEMPFAIL: the
    mail server keeps the message and retries) when the database is unavailable. Delivering the same message
    again is harmless: it is stored and handled once.
    """
    raw = sys.stdin.buffer.read()
    try:
        runtime = connect(seed=False)
        outcome = receive_email(runtime, raw, ticket_link=_ticket_link(runtime.settings))
    except (SQLAlchemyError, OSError) as exc:
        click.echo(f"database unavailable, try again later: {type(exc).__name__}", err=True)
        sys.exit(EX_TEMPFAIL)
    except ConfigError as exc:
        click.echo(f"configuration error, fix it and the mail server's retry will deliver: {exc}", err=True)
        sys.exit(EX_TEMPFAIL)
    click.echo(json.dumps(outcome.to_dict()))


@mail.command("worker")
@click.option("--once", is_flag=True, help="One pass over the due e-mails, then exit.")
def worker(once: bool) -> None:
    """Send queued e-mails over SMTP (SMTP_HOST …), retrying with backoff; runs until interrupted."""
    runtime = connect(seed=False)
    if not runtime.settings.smtp_host:
        raise click.ClickException("SMTP_HOST is not set: there is nowhere to send e-mail")
    mail_worker = MailWorker(runtime)
    if once:
        delivery = mail_worker.run_once()
        click.echo(f"sent {delivery.sent}, failed {delivery.failed}")
        return
    click.echo(f"sending e-mail through {runtime.settings.smtp_host}:{runtime.settings.smtp_port}", err=True)
    try:
        mail_worker.run_forever()
    except KeyboardInterrupt:
        pass
