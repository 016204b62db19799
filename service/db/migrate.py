"""Apply Alembic migrations from code (serve, the Python API, tests, evaluation).

Alembic is imported only when a migration runs: a database already at ``HEAD_REVISION`` (every call after the
first) is recognised by one query, which saves a console command Alembic's import (~0.1 s, with Mako and its
Pygments plugin) and the reading of every migration script. tests/test_migrations.py checks that ``HEAD_REVISION``
is Alembic's head.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import sqlalchemy as sa
from psycopg import sql

from service.db.engine import create_engine

if TYPE_CHECKING:
    from alembic.config import Config

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HEAD_REVISION = "0034"  # the newest migration: 0026, 0028, 0029, …, 0034 (no 0027: issue 32 needed none at first)


def alembic_config(connection: sa.Connection | None = None) -> "Config":
    """The project's alembic.ini, bound to ``connection`` when given."""
    from alembic.config import Config

    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.attributes["configure_logging"] = False
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def stored_revisions(connection: sa.Connection) -> list[str]:
    """The revisions in the connection's own schema's ``alembic_version`` (as Alembic reads it: the current
    schema, not the rest of the search path), [] when it has none."""
    schema = connection.execute(sa.text("SELECT current_schema()")).scalar_one()
    table = sql.SQL("{}.alembic_version").format(sql.Identifier(schema)).as_string(None)
    if connection.execute(sa.text("SELECT to_regclass(:table)"), {"table": table}).scalar() is None:
        return []
    return list(connection.execute(sa.text(f"SELECT version_num FROM {table}")).scalars())


def upgrade_database(engine: sa.Engine, revision: str = "head") -> None:
    """Migrate to ``revision`` and drop pooled connections that predate the vector type (nothing to do, and no
    Alembic, when the database is already at the head)."""
    if revision == "head":
        with engine.connect() as connection:
            if stored_revisions(connection) == [HEAD_REVISION]:
                return
    from alembic import command

    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)
    engine.dispose()


def downgrade_database(engine: sa.Engine, revision: str = "base") -> None:
    """Migrate down to ``revision``."""
    from alembic import command

    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
    engine.dispose()


def current_revision(engine: sa.Engine) -> str | None:
    """The revision the database is at, or None before the first migration."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


@contextmanager
def throwaway_schema(database_url: str, prefix: str) -> Iterator[sa.Engine]:
    """An engine on a new, migrated schema of ``database_url`` (never the user's tables); dropped afterwards."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(database_url, pool_size=1)
    with admin.begin() as conn:
        # In the default schema first: created by the migration, it would land in (and go with) the throwaway one.
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        conn.execute(sa.schema.CreateSchema(schema))
    search_path = sql.SQL("{},public").format(sql.Identifier(schema)).as_string(None)
    engine = create_engine(database_url, search_path=search_path, pool_size=1)
    try:
        upgrade_database(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.schema.DropSchema(schema, cascade=True, if_exists=True))
        admin.dispose()
