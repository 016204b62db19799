"""Customer data commands: customer export, customer erase."""

from __future__ import annotations

import json
from pathlib import Path

import click

from service.cli.context import CliGroup, connect
from service.privacy.erase import InvalidEmail, erase_customer, normalise_email
from service.privacy.export import export_customer


def _address(email: str) -> str:
    try:
        return normalise_email(email)
    except InvalidEmail as exc:
        raise click.BadParameter(str(exc), param_hint="--email") from None


@click.group(cls=CliGroup)
def customer() -> None:
    """Export or erase everything stored about one customer (by e-mail address)."""


@customer.command("export")
@click.option("--email", required=True, help="The customer's e-mail address.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The ZIP file to write.")
def export_command(email: str, out: Path) -> None:
    """Write a ZIP of the customer's tickets, messages, attachments, ratings, feedback and raw mail."""
    runtime = connect(seed=False)
    with runtime.session() as session:
        export = export_customer(session, _address(email))
    out.write_bytes(export.data)
    click.echo(f"wrote {out} ({export.tickets} tickets, {len(export.data):,} bytes)")


@customer.command("erase")
@click.option("--email", required=True, help="The customer's e-mail address.")
@click.option("--dry-run", is_flag=True, help="Print what would be erased; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def erase_command(email: str, dry_run: bool, as_json: bool) -> None:
    """Erase the customer's personal data in every table, in one transaction; prints the rows of each kind."""
    runtime = connect(seed=False)
    with runtime.session() as session:
        report = erase_customer(session, _address(email), actor="cli", dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    verb = "would erase" if dry_run else "erased"
    click.echo(f"{verb} {report.total} rows")
    for name, count in report.counts.items():
        if count:
            click.echo(f"  {name}: {count}")
