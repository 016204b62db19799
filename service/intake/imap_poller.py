"""The IMAP poller: passes of ``fetch_new_mail`` in a thread inside ``serve``, or alone (``mail fetch``).

One poller fetches per deployment: every gunicorn worker starts one, and a PostgreSQL advisory lock held on a
connection of its own lets one of them fetch (PostgreSQL frees it the moment its process dies, kill -9 included;
no transaction stays open). An unreachable server, a refused login or a database outage only delays the next
pass, with exponential backoff; the loop survives every exception.
"""

from __future__ import annotations

import logging
import threading

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from service.intake.imap import (TIMEOUT_SECONDS, FetchReport, account_key, close_mailbox, connect_mailbox,
                                 fetch_new_mail)
from service.intake.imap_status import clear_poll_failure, record_poll_failure
from service.runtime import Runtime

log = logging.getLogger(__name__)
IMAP_LOCK_KEY = 0x5375_7070_496D_6170  # pg advisory lock ("SuppImap"): one fetching poller per deployment
BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS = 5.0, 900.0


def backoff_seconds(failures: int, *, base: float = BACKOFF_BASE_SECONDS, cap: float = BACKOFF_MAX_SECONDS) -> float:
    """The wait after ``failures`` failed passes in a row: base, 2×base, 4×base … at most ``cap``."""
    return min(base * 2 ** max(failures - 1, 0), cap)


class DeploymentLock:
    """A session-level advisory lock on a dedicated connection (outside the pool): held until released or until
    the process or the connection dies."""

    def __init__(self, engine: sa.Engine, key: int = IMAP_LOCK_KEY) -> None:
        self.engine = sa.create_engine(engine.url, poolclass=NullPool)
        self.key = key
        self.connection: sa.Connection | None = None

    def hold(self) -> bool:
        """Whether this process holds the lock now (taking it if free); a dead connection is replaced."""
        if self.connection is not None:
            try:
                self.connection.exec_driver_sql("SELECT 1")
                return True
            except sa.exc.DBAPIError:  # the server restarted or the connection broke: the lock is gone
                self.release()
        connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            taken = connection.scalar(sa.select(sa.func.pg_try_advisory_lock(self.key)))
        except BaseException:
            connection.close()
            raise
        if not taken:
            connection.close()
            return False
        self.connection = connection
        return True

    def release(self) -> None:
        """Drop the connection, which frees the lock."""
        if self.connection is not None:
            try:
                self.connection.close()
            except sa.exc.DBAPIError:
                pass
            self.connection = None


class ImapPoller:
    """Fetches the IMAP folder every ``interval`` seconds until stopped, backing off while anything fails."""

    def __init__(self, runtime: Runtime, *, interval: float | None = None, backoff_base: float = BACKOFF_BASE_SECONDS,
                 backoff_max: float = BACKOFF_MAX_SECONDS, timeout: float = TIMEOUT_SECONDS) -> None:
        self.runtime = runtime
        self.interval = runtime.settings.imap_poll_seconds if interval is None else interval
        self.backoff_base, self.backoff_max, self.timeout = backoff_base, backoff_max, timeout
        self.lock = DeploymentLock(runtime.engine)
        self.failures = 0  # failed passes in a row
        self.last_error: str | None = None
        self.last_report: FetchReport | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> FetchReport:
        """Log in, take the new messages, log out (no lock: ``step`` holds it)."""
        client = connect_mailbox(self.runtime.settings, timeout=self.timeout)
        try:
            return fetch_new_mail(self.runtime, client)
        finally:
            close_mailbox(client)

    def step(self) -> float:
        """One pass if this process holds the lock; the seconds to wait before the next."""
        try:
            if not self.lock.hold():
                return self.interval  # another process of the deployment fetches
            report = self.run_once()
        except Exception as exc:  # the loop must survive anything: log it, back off, try again
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            delay = backoff_seconds(self.failures, base=self.backoff_base, cap=self.backoff_max)
            log.warning("IMAP intake from %s failed (%s in a row): %s; retrying in %.1fs",
                        self.runtime.settings.imap_host, self.failures, self.last_error, delay)
            self.record_status(self.last_error, delay)
            return delay
        if self.failures:
            log.warning("IMAP intake from %s recovered after %s failed passes", self.runtime.settings.imap_host,
                        self.failures)
        self.failures, self.last_error = 0, None
        self.last_report = report
        self.record_status(None, 0.0)
        if report.fetched:
            log.info("IMAP intake: %s", report.to_dict())
        return self.interval

    def record_status(self, error: str | None, retry_in: float | None) -> None:
        """Record the pass's failure (or its success) for /admin/mail; a database that is down only logs.
        ``retry_in`` None: no next pass is planned here (``mail fetch --once`` from cron)."""
        where = {"account": account_key(self.runtime.settings), "folder": self.runtime.settings.imap_folder}
        try:
            if error is None:
                clear_poll_failure(self.runtime, **where)
            else:
                record_poll_failure(self.runtime, **where, error=error, retry_in=retry_in)
        except Exception as exc:  # the loop must survive: the log line above already says what failed
            log.warning("could not record the IMAP poller's status: %s", exc)

    def run_forever(self) -> None:
        """Pass after pass until ``stop``; the lock is released on the way out."""
        try:
            while not self._stop.is_set():
                self._stop.wait(self.step())
        finally:
            self.lock.release()

    def start(self) -> "ImapPoller":
        """Run in a daemon thread (inside serve: every gunicorn worker runs one; the lock lets one fetch)."""
        self._thread = threading.Thread(target=self.run_forever, name="imap-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the loop to end and wait for it (a pass in progress runs to its end, each message recorded)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 30)


def start_imap_poller(runtime: Runtime) -> ImapPoller | None:
    """The in-process poller when IMAP_HOST is set, else None."""
    return ImapPoller(runtime).start() if runtime.settings.imap_host else None
