"""``supportrag config``: the effective settings, where each came from, and the configuration reference."""

from __future__ import annotations

import dataclasses
import json
import os

import click

from service.config import Settings
from service.config_table import describe, markdown_table


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per setting instead of a table.")
@click.option("--markdown", is_flag=True, help="Print the configuration reference (docs/configuration.md's table).")
def config_command(as_json: bool, markdown: bool) -> None:
    """Print the effective settings (secrets masked) and where each came from: environment, derived or default."""
    if markdown:
        click.echo(markdown_table(Settings), nl=False)
        return
    rows = describe(Settings.from_env(os.environ), Settings.sources(os.environ))
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
        return
    width = max(len(row.env) for row in rows)
    value_width = min(40, max(len(row.value) for row in rows))
    for index, row in enumerate(rows):
        if index == 0 or row.area != rows[index - 1].area:
            click.echo(f"{chr(10) if index else ''}[{row.area}]")
        click.echo(f"{row.env:<{width}}  {row.value:<{value_width}}  {row.source}")
