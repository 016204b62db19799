"""``supportrag synonyms``: the editable synonym groups of the full-text leg."""

from __future__ import annotations

import click
import sqlalchemy as sa

from service.cli.context import connect
from service.db.models import SynonymGroup
from service.retrieval.lexical import add_synonym_group, delete_synonym_group


@click.group()
def synonyms() -> None:
    """Synonym groups used by keyword search (refund ↔ money back, ...)."""


@synonyms.command("list")
def synonyms_list() -> None:
    """Print every group with its id."""


    runtime = connect(seed=False)
    with runtime.session() as session:
        groups = session.execute(sa.select(SynonymGroup.id, SynonymGroup.terms).order_by(SynonymGroup.id)).all()
    if not groups:
        click.echo("no synonym groups")
    for group_id, terms in groups:
        click.echo(f"{group_id:4d}  {' | '.join(terms)}")


@synonyms.command("add")
@click.argument("terms", nargs=-1, required=True)
def synonyms_add(terms: tuple[str, ...]) -> None:
    """Add a group of equivalent TERMS (quote phrases: "money back")."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        group_id = add_synonym_group(session, terms)
    click.echo(f"added synonym group {group_id}")


@synonyms.command("remove")
@click.argument("group_id", type=int)
def synonyms_remove(group_id: int) -> None:
    """Remove the group with GROUP_ID."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        removed = delete_synonym_group(session, group_id)
    if not removed:
        raise click.ClickException(f"no synonym group {group_id}")
    click.echo(f"removed synonym group {group_id}")
