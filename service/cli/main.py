"""The ``supportrag`` group: serve, db, seed, and the command families registered from their modules."""

from __future__ import annotations

import logging

import click

from service.cli import accounts, knowledge, learning, mail, model, synonyms, tickets
from service.cli.context import CliGroup, connect, connect_bare
from service.db.migrate import current_revision, downgrade_database, upgrade_database
from service.retrieval.approximate import build_approximate_index
from service.retrieval.ticket_neighbours import build_ticket_index
from service.web.serving import serve_forever


@click.group(cls=CliGroup)
@click.option("-v", "--verbose", is_flag=True, help="Log progress details.")
def main(verbose: bool) -> None:
    """Support-ticket answering service on PostgreSQL + pgvector."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.option("--host", help="Address to bind (default: SUPPORTRAG_HOST, else 127.0.0.1).")
@click.option("--port", type=int, help="Port (default: PORT, else 5000).")
@click.option("--dev", is_flag=True, help="Flask's development server instead of gunicorn.")
@click.option("--workers", envvar="WEB_CONCURRENCY", type=int, help="gunicorn workers (default: one per core).")
@click.option("--threads", type=int, help="Threads per worker (default: 4; the database pool matches).")
def serve(host: str | None, port: int | None, dev: bool, workers: int | None, threads: int | None) -> None:
    """Start the database if embedded, migrate, seed on first run, and serve HTTP."""
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
def seed() -> None:
    """Insert the default articles, once per database."""
    inserted = connect(seed=False).seed()
    click.echo(f"inserted {inserted} articles" if inserted else "already seeded; nothing inserted")


for command in (knowledge.add, knowledge.import_command, knowledge.search, knowledge.stats, knowledge.reembed,
                knowledge.eval_command, tickets.ask, tickets.gaps, tickets.tickets_group, accounts.admin, accounts.token,
                synonyms.synonyms, mail.mail, learning.candidates, learning.importance, model.model):
    main.add_command(command)


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
