"""The mail worker: a loop over ``deliver_due_mail``, as a thread inside ``serve`` or alone (``mail worker``).

The loop survives every exception: one e-mail's failure is recorded on its row (service.mail.delivery), and
anything else (the database gone, a bug) is logged and the next pass comes after the interval.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.exc import SQLAlchemyError

from service.mail.delivery import Delivery, deliver_due_mail
from service.mail.transport import SmtpTransport, Transport
from service.runtime import Runtime

log = logging.getLogger(__name__)
POLL_SECONDS = 2.0


class MailWorker:
    """Sends due e-mails every ``interval`` seconds until stopped; a database outage only delays it."""

    def __init__(self, runtime: Runtime, transport: Transport | None = None, interval: float = POLL_SECONDS) -> None:
        self.runtime, self.interval = runtime, interval
        self.transport = transport or SmtpTransport(runtime.settings)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> Delivery:
        """One pass over the due e-mails."""
        return deliver_due_mail(self.runtime.session, self.runtime.settings, self.transport,
                                stopping=self._stop.is_set)

    def run_forever(self) -> None:
        """Pass after pass until ``stop``."""
        while not self._stop.is_set():
            try:
                self.run_once()
            except SQLAlchemyError as exc:
                log.warning("mail worker: database unavailable (%s); retrying", type(exc).__name__)
            except Exception:  # noqa: BLE001 - the thread must outlive any bug; the next pass tries again
                log.exception("mail worker: the pass failed; retrying")
            self._stop.wait(self.interval)

    def start(self) -> "MailWorker":
        """Run in a daemon thread (inside serve: every gunicorn worker runs one; leases keep them apart)."""
        self._thread = threading.Thread(target=self.run_forever, name="mail-worker", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the loop to end and wait for it: the e-mail being sent is finished and marked sent (or its failure
        recorded), and no other is claimed, so a restart sends nothing twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 30)


RUNNING: list[MailWorker] = []  # this process's in-process workers, stopped by stop_mail_workers on shutdown


def start_mail_worker(runtime: Runtime) -> MailWorker | None:
    """The in-process worker when SMTP is configured, else None."""
    if not runtime.settings.smtp_host:
        return None
    worker = MailWorker(runtime).start()
    RUNNING.append(worker)
    return worker


def stop_mail_workers() -> None:
    """Stop this process's mail workers (gunicorn's worker_exit, a SIGTERM): each finishes the send it holds."""
    while RUNNING:
        RUNNING.pop().stop()
