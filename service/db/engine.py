"""Engine and sessions: the embedded server or DATABASE_URL, pooled, with pgvector registered."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import sqlalchemy as sa
from pgvector.psycopg import register_vector
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from service.config import Settings
from service.db.embedded import start_embedded_server

log = logging.getLogger(__name__)


def normalise_database_url(url: str) -> str:
    """Make ``postgres://`` and ``postgresql://`` URLs use the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def resolve_database_url(settings: Settings) -> str:
    """DATABASE_URL when set, else the embedded server (started on demand)."""
    if settings.database_url:
        return normalise_database_url(settings.database_url)

    url = start_embedded_server(settings.embedded_pgdata)
    log.info("embedded PostgreSQL data directory: %s", settings.embedded_pgdata)
    return url


def _register_vector_if_present(dbapi_connection, _record) -> None:
    """Teach each new psycopg connection the vector type (binary in and out).

    Before the first migration the type does not exist yet; such a connection is
    left as is, and the engine's pool is disposed after migrating.
    """
    # to_regtype follows the search_path, as register_vector's lookup does.
    row = dbapi_connection.execute("SELECT to_regtype('vector') IS NOT NULL").fetchone()
    if row[0]:
        register_vector(dbapi_connection)
    # The probe above opened a transaction; end it so the pool hands out a clean connection.
    dbapi_connection.rollback()


def create_engine(url: str, *, search_path: str | None = None, pool_size: int = 5) -> sa.Engine:
    """A pooled engine; ``search_path`` isolates throwaway schemas (evaluation, tests)."""
    # Custom plans always: psycopg prepares a statement after 5 runs, and PostgreSQL may then switch to a
    # generic plan that cannot see the values (10 candidate ids planned as "any number": a seq scan
    # of every article, 1 s instead of 0.4 ms, measured). Planning a search costs well under a millisecond.
    options = "-c plan_cache_mode=force_custom_plan" + (f" -c search_path={search_path}" if search_path else "")
    connect_args = {"options": options}
    engine = sa.create_engine(
        normalise_database_url(url),
        pool_size=pool_size,
        max_overflow=pool_size * 2,
        pool_pre_ping=True,
        connect_args=connect_args,
        # Errors never carry bound values into logs: they hold ticket bodies, e-mails and token hashes.
        hide_parameters=True,
    )
    event.listen(engine, "connect", _register_vector_if_present)
    return engine


# Statements carrying this execution option may run on the read replica (DATABASE_READ_URL): searches.
READ_REPLICA = "supportrag_read_replica"


class RoutingSession(Session):
    """A session that sends statements marked ``READ_REPLICA`` to ``info["read_engine"]`` when there is one.

    The replica's connection is its own transaction: a search there does not see this session's uncommitted
    writes (none of the search paths needs them), and it lags the primary by the replication delay.
    """

    def get_bind(self, mapper=None, *, clause=None, **kwargs):
        read_engine = self.info.get("read_engine")
        if read_engine is not None and clause is not None and clause.get_execution_options().get(READ_REPLICA):
            return read_engine
        return super().get_bind(mapper, clause=clause, **kwargs)


def make_session_factory(engine: sa.Engine, *, read_engine: sa.Engine | None = None) -> sessionmaker[Session]:
    """Sessions that never expire objects on commit (views read them after committing); searches go to
    ``read_engine`` when given."""
    return sessionmaker(engine, class_=RoutingSession, expire_on_commit=False, info={"read_engine": read_engine})


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A unit of work: commit on success, roll back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
