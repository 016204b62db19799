"""Tickets a dead worker left ``received`` (``kill -9`` mid-answer): answer them again, or record the failure.

Run by every ``serve`` worker in the background and by ``supportrag tickets recover``. A ticket is claimed with a
transaction-scoped advisory lock, so two sweepers never answer the same one at once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from service.db.models import Ticket
from service.providers.llm import ChatModel
from service.runtime import Runtime
from service.tickets.workflow import finish_ticket

log = logging.getLogger(__name__)
RECOVERY_LOCK_NAMESPACE = 0x5EC0  # the first half of the advisory lock key; the ticket id is the second
CLAIM_SQL = sa.text("SELECT pg_try_advisory_xact_lock(:namespace, CAST(:ticket_id % 2147483647 AS integer))")


@dataclass(frozen=True)
class Recovery:
    """What one sweep did: tickets found stuck, and their outcomes now."""

    found: int
    outcomes: dict[int, str]


def stuck_tickets(session, *, older_than_seconds: int, limit: int) -> list[int]:
    """Ids of tickets still ``received`` this long after submission, oldest first."""
    cutoff = sa.func.clock_timestamp() - timedelta(seconds=older_than_seconds)
    return list(session.scalars(sa.select(Ticket.id).where(Ticket.status == "received", Ticket.created_at < cutoff)
                                .order_by(Ticket.created_at, Ticket.id).limit(limit)))


def recover_ticket(runtime: Runtime, chat: ChatModel | None, ticket_id: int) -> str | None:
    """Answer (or fail) one stuck ticket unless another sweeper holds it; returns its status after, or None."""
    with runtime.sessions() as claim, claim.begin():
        if not claim.execute(CLAIM_SQL, {"namespace": RECOVERY_LOCK_NAMESPACE, "ticket_id": ticket_id}).scalar():
            return None
        ticket = claim.get(Ticket, ticket_id)
        if ticket is None or ticket.status != "received":
            return None  # answered meanwhile
        subject, body = ticket.subject, ticket.body
        claim.expunge(ticket)
        finish_ticket(runtime, chat, ticket_id, subject, body, started=time.perf_counter())
    with runtime.session() as session:
        return session.scalar(sa.select(Ticket.status).where(Ticket.id == ticket_id))


def recover_stuck_tickets(runtime: Runtime, chat: ChatModel | None, *, older_than_seconds: int,
                          limit: int = 100) -> Recovery:
    """One sweep: every ticket stuck past ``older_than_seconds`` is answered or marked ``failed``."""
    with runtime.session() as session:
        ids = stuck_tickets(session, older_than_seconds=older_than_seconds, limit=limit)
    outcomes = {}
    for ticket_id in ids:
        status = recover_ticket(runtime, chat, ticket_id)
        if status is not None:
            outcomes[ticket_id] = status
            log.warning("recovered ticket %s stuck in 'received': now %s", ticket_id, status)
    return Recovery(found=len(ids), outcomes=outcomes)


def start_recovery_thread(runtime: Runtime, *, interval_seconds: float) -> threading.Thread:
    """Sweep now, then every ``interval_seconds``, in a daemon thread for as long as the process lives."""

    def sweep_forever() -> None:
        while True:  # the first sweep at once: a restart after a crash finds that crash's tickets
            try:
                recover_stuck_tickets(runtime, runtime.chat, older_than_seconds=runtime.settings.ticket_stuck_seconds)
            except Exception:  # a database outage must not end the sweeping
                log.exception("ticket recovery sweep failed")
            time.sleep(interval_seconds)

    thread = threading.Thread(target=sweep_forever, name="ticket-recovery", daemon=True)
    thread.start()
    return thread
