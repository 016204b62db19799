"""``supportrag mail fetch``: take new e-mail from the IMAP mailbox (IMAP_HOST …) into tickets."""

from __future__ import annotations

import json
import sys

import click
from imapclient.exceptions import IMAPClientError, LoginError
from sqlalchemy.exc import OperationalError

from service.cli.context import connect
from service.intake.imap_poller import ImapPoller

EX_TEMPFAIL = 75  # sysexits.h: try again later (the mailbox or the database is unavailable)


@click.command("fetch")
@click.option("--once", is_flag=True, help="One pass over the folder, print what was done as JSON, then exit.")
def fetch(once: bool) -> None:
    """Fetch new e-mail over IMAP into tickets, each message exactly once; runs until interrupted.

    Without --once it polls every IMAP_POLL_SECONDS and backs off while the server is down. ``serve`` runs the
    same poller itself when IMAP_HOST is set; one process of a deployment fetches at a time.
    """
    runtime = connect(seed=False)
    settings = runtime.settings
    if not settings.imap_host:
        raise click.ClickException("IMAP_HOST is not set: there is no mailbox to fetch from")
    poller = ImapPoller(runtime)
    if once:
        _fetch_once(poller)
        return
    click.echo(f"fetching {settings.imap_folder} of {settings.imap_username} at {settings.imap_host}:"
               f"{settings.imap_port} every {settings.imap_poll_seconds:g}s", err=True)
    try:
        poller.run_forever()
    except KeyboardInterrupt:
        pass


def _fetch_once(poller: ImapPoller) -> None:
    """One locked pass; exit 75 when the mailbox or the database cannot be reached, 1 when the login is refused."""
    try:
        if not poller.lock.hold():
            click.echo("another process is fetching from this mailbox; nothing done", err=True)
            return
        report = poller.run_once()
    except LoginError as exc:  # retrying will not help: say what to fix
        poller.record_status(f"{type(exc).__name__}: {exc}", None)
        raise click.ClickException(f"the IMAP server refused the login of {poller.runtime.settings.imap_username} "
                                   f"({exc}): check IMAP_USERNAME and IMAP_PASSWORD (an app password for hosted "
                                   "mail; see docs/email-imap.md)") from exc
    except (OSError, IMAPClientError, OperationalError) as exc:
        poller.record_status(f"{type(exc).__name__}: {exc}", None)  # listed on /admin/mail (TLS never downgraded)
        click.echo(f"IMAP intake unavailable, try again later: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EX_TEMPFAIL)
    finally:
        poller.lock.release()
    poller.record_status(None, None)
    click.echo(json.dumps(report.to_dict()))
