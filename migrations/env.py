"""Alembic environment: runs on a connection handed over by the service, or on the configured database."""

from __future__ import annotations

from logging.config import fileConfig

import sqlalchemy as sa
from alembic import context

from service.db.models import Base

# Any constant works; it only has to be the same in every process that migrates.
MIGRATION_LOCK_KEY = 7_331_001

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def run_migrations_on(connection: sa.Connection) -> None:
    """Migrate under an advisory lock so concurrent starts migrate exactly once."""
    # The version table lives in the first schema of the search_path, next to the tables, so a
    # throwaway schema (evaluation) is migrated on its own instead of reading public's version.
    schema = connection.execute(sa.text("SELECT current_schema()")).scalar_one()
    context.configure(
        connection=connection, target_metadata=target_metadata, compare_type=True, version_table_schema=schema
    )
    with context.begin_transaction():
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


def run_migrations_online() -> None:
    """Use the caller's connection if given, else open one to the configured database."""
    connection = config.attributes.get("connection")
    if connection is not None:
        run_migrations_on(connection)
        return
    from service.config import Settings
    from service.db.engine import create_engine, resolve_database_url

    engine = create_engine(resolve_database_url(Settings.from_env()), pool_size=1)
    try:
        with engine.connect() as conn:
            run_migrations_on(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("Offline (--sql) migrations are not supported; run against a database.")
run_migrations_online()
