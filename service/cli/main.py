"""The ``supportrag`` group: serve, db, seed, and the command families registered from their modules."""

from __future__ import annotations

import importlib
import logging

import click

from service.cli.context import CliGroup, connect, connect_bare
from service.db.migrate import current_revision, downgrade_database, upgrade_database
from service.knowledge.seeding import remove_seed_articles
from service.retrieval.approximate import build_approximate_index
from service.retrieval.ticket_neighbours import build_ticket_index

# Command families, imported only when their command runs (or for --help): a search should not pay for the web
# app, mail, accounts and tickets modules it never calls (issue 26: `supportrag search` within 1.5 s).
LAZY_COMMANDS = {
    "add": "service.cli.knowledge:add", "import": "service.cli.knowledge:import_command",
    "search": "service.cli.knowledge:search", "stats": "service.cli.knowledge:stats",
    "reembed": "service.cli.knowledge:reembed", "eval": "service.cli.knowledge:eval_command",
    "ask": "service.cli.tickets:ask", "gaps": "service.cli.tickets:gaps", "tickets": "service.cli.tickets:tickets_group",
    "admin": "service.cli.accounts:admin", "token": "service.cli.accounts:token",
    "synonyms": "service.cli.synonyms:synonyms", "mail": "service.cli.mail:mail",
    "candidates": "service.cli.learning:candidates", "importance": "service.cli.learning:importance",
    "model": "service.cli.model:model", "config": "service.cli.settings:config_command",
    "gate": "service.cli.gate:gate",
    "customer": "service.cli.privacy:customer",
}


class LazyGroup(CliGroup):
    """The top-level group: the commands in ``LAZY_COMMANDS`` are imported by name on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, eager and lazy, sorted."""
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The eager command, else the lazy one imported now."""
        if name in self.commands or name not in LAZY_COMMANDS:
            return super().get_command(ctx, name)
        module, _, attribute = LAZY_COMMANDS[name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        self.add_command(command, name)
        return command


@click.group(cls=LazyGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log progress details.")
def main(verbose: bool) -> None:
    """Support-ticket answering service on PostgreSQL + pgvector."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.option("--host", help="Address to bind (default: SUPPORTRAG_HOST, else 127.0.0.1).")
@click.option("--port", type=int, help="Port (default: PORT, else 5000).")
@click.option("--dev", is_flag=True, help="Flask's development server instead of gunicorn.")
@click.option("--workers", type=int, help="gunicorn workers (default: WEB_CONCURRENCY, else one per core).")
@click.option("--threads", type=int, help="Threads per worker (default: 4; the database pool matches).")
def serve(host: str | None, port: int | None, dev: bool, workers: int | None, threads: int | None) -> None:
    """Start the database if embedded, migrate, seed on first run, and serve HTTP."""
    from service.web.serving import serve_forever  # here: flask and gunicorn only for this command (LAZY_COMMANDS)

    serve_forever(host=host, port=port, dev=dev, workers=workers, threads=threads)


@main.group()
def db() -> None:
    """Schema migrations."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    runtime = connect_bare()
    upgrade_database(runtime.engine, revision)
    click.echo(f"database at revision {current_revision(runtime.engine) or 'none'}")


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Migrate the database down to REVISION ('base' removes every table)."""
    runtime = connect_bare()
    downgrade_database(runtime.engine, revision)
    click.echo(f"database at revision {current_revision(runtime.engine) or 'none'}")


@db.command("current")
def db_current() -> None:
    """Print the database's current revision."""
    click.echo(current_revision(connect_bare().engine) or "none")


@main.command()
@click.option("--remove", is_flag=True, help="Delete the default articles still as seeded (edited ones stay).")
def seed(remove: bool) -> None:
    """Insert the default articles, once per database; --remove deletes them (they never come back)."""
    runtime = connect(seed=False)
    if remove:
        with runtime.session() as session:
            removed = remove_seed_articles(session)
        click.echo(f"removed {removed} default articles")
        return
    inserted = runtime.seed()
    click.echo(f"inserted {inserted} articles" if inserted else "already seeded; nothing inserted")



@db.command("hnsw")
@click.option("--m", default=16, show_default=True, type=click.IntRange(2, 100), help="HNSW links per node.")
@click.option("--ef-construction", default=64, show_default=True, type=click.IntRange(4, 1000),
              help="Candidate list size while building.")
def db_hnsw(m: int, ef_construction: int) -> None:
    """Build the HNSW indexes for the active model: similar tickets' (at its width), and those the opt-in
    approximate mode reads (SEARCH_APPROXIMATE=1)."""
    runtime = connect(seed=False)
    with runtime.session() as session:  # the ticket index needs only the width, known before any vector exists
        name = build_ticket_index(session, runtime.embedder.dimensions, m=m, ef_construction=ef_construction)
    click.echo(f"built {name} on solved ticket vectors")
    with runtime.session() as session:
        built = build_approximate_index(session, runtime.embedder.model_name, m=m, ef_construction=ef_construction)
    if built is None:
        raise click.ClickException(f"no vectors of {runtime.embedder.model_name} yet: import or seed first")
    click.echo(f"built {', '.join(built.names)} on {built.width}-d half-precision vectors of {built.model}")
