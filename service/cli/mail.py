"""``supportrag mail …``: deliver an e-mail from the mail server (pipe), send the outbox (worker), and see or
retry failed e-mails (status, retry)."""

from __future__ import annotations

import json
import sys
from typing import BinaryIO
from datetime import timezone

import click
from sqlalchemy.exc import SQLAlchemyError

from service.cli.context import connect
from service.cli.mail_fetch import fetch
from service.links import ticket_link
from service.config import ConfigError, Settings
from service.intake.receive import receive_email
from service.mail.outbox import NotFailed, OutboxNotFound, failed_mail, outbox_counts, retry_failed_mail
from service.mail.worker import MailWorker

EX_TEMPFAIL = 75  # sysexits.h: Postfix and Exim keep the message and retry later


@click.group()
def mail() -> None:
    """E-mail in and out (see docs/email.md)."""


def _ticket_link(settings: Settings):
    return lambda ticket_id, _secret: ticket_link(settings, ticket_id)


def read_capped(stream: BinaryIO, cap: int) -> tuple[bytes, int]:
    """The first ``cap + 1`` bytes (enough to know the message is over the cap) and the whole size; the rest is
    read and dropped, so memory stays bounded and the mail server sees its message taken."""
    raw = stream.read(cap + 1)
    size = len(raw)
    while chunk := stream.read(1024 * 1024):
        size += len(chunk)
    return raw, size


@mail.command("pipe")
def pipe() -> None:
    """Read one RFC 5322 message on stdin (Postfix/Exim "deliver to a command"); print what was done as JSON.

    Exits 0 once the message is stored and its outcome recorded (a quarantine included), 75 (EX_TEMPFAIL: the
    mail server keeps the message and retries) when the database is unavailable. Delivering the same message
    again is harmless: it is stored and handled once.
    """
    try:
        runtime = connect(seed=False)
        raw, size = read_capped(sys.stdin.buffer, runtime.settings.inbound_raw_max_bytes)
        outcome = receive_email(runtime, raw, ticket_link=_ticket_link(runtime.settings), size=size)
    except (SQLAlchemyError, OSError) as exc:
        click.echo(f"database unavailable, try again later: {type(exc).__name__}", err=True)
        sys.exit(EX_TEMPFAIL)
    except ConfigError as exc:
        click.echo(f"configuration error, fix it and the mail server's retry will deliver: {exc}", err=True)
        sys.exit(EX_TEMPFAIL)
    except Exception as exc:  # noqa: BLE001 - never exit 1 (the mail server would bounce it): it keeps it instead
        click.echo(f"could not take the message, the mail server will retry: {type(exc).__name__}: {exc}", err=True)
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


@mail.command("status")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000), help="Failed e-mails listed.")
def status(limit: int) -> None:
    """The outbox: queued, being sent, failed (each with its reason) and sent in the last 24 hours."""
    runtime = connect(seed=False)
    with runtime.session() as session:
        counts, failed = outbox_counts(session), failed_mail(session, limit=limit)
    click.echo(f"queued {counts.queued}, sending {counts.sending}, failed {counts.failed}, "
               f"sent in the last 24 h {counts.sent_last_day}")
    for f in failed:
        ticket = f"T-{f.ticket_id}" if f.ticket_id else "no ticket"
        click.echo(f"failed #{f.outbox_id} {ticket} to {f.to_address} after {f.attempts} attempt(s), "
                   f"{f.failed_at.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC: {f.error or 'no reason recorded'}")
    if failed:
        click.echo("retry one with: supportrag mail retry ID")


@mail.command("retry")
@click.argument("outbox_id", type=click.IntRange(1, 2**63 - 1))
def retry(outbox_id: int) -> None:
    """Send a failed e-mail again from its first attempt (the worker picks it up)."""
    runtime = connect(seed=False)
    try:
        with runtime.session() as session:
            retry_failed_mail(session, outbox_id)
    except (OutboxNotFound, NotFailed) as exc:
        raise click.ClickException(str(exc) if isinstance(exc, NotFailed) else f"no e-mail {outbox_id}") from None
    click.echo(f"e-mail {outbox_id} queued again")


mail.add_command(fetch)  # IMAP intake (`mail fetch`), in its own module
