"""Apply Alembic migrations from code (serve, the Python API, tests, evaluation)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

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
