"""Apply Alembic migrations from code (serve, the Python API, tests, evaluation)."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from psycopg import sql

from service.db.engine import create_engine

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """The project's alembic.ini, bound to ``connection`` when given."""
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.attributes["configure_logging"] = False
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade_database(engine: sa.Engine, revision: str = "head") -> None:
    """Migrate to ``revision`` and drop pooled connections that predate the vector type."""
    with engine.begin() as connection:
        command.upgrade(alembic_config(connection), revision)
    engine.dispose()


def downgrade_database(engine: sa.Engine, revision: str = "base") -> None:
    """Migrate down to ``revision``."""
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), revision)
    engine.dispose()


def current_revision(engine: sa.Engine) -> str | None:
    """The revision the database is at, or None before the first migration."""

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
