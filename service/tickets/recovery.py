"""Tickets a dead worker left ``received`` (``kill -9`` mid-answer): answer them again, or record the failure;
and acknowledgements a crash left owed (``ack_pending``): queue them, with a fresh signed link.

Run by every ``serve`` worker in the background and by ``supportrag tickets recover``. A ticket is claimed with a
lease (``recovery_lease_until``, committed at once), so two sweepers never answer the same one at once and no
transaction stays open across the language model; storing the answer checks the ticket is still ``received``.
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
from service.tickets.queries import get_ticket
from service.tickets.work import acknowledge
from service.tickets.workflow import finish_ticket

log = logging.getLogger(__name__)
LEASE_SECONDS = 600  # longer than any answer takes (the LLM's timeout and retries); a dead sweeper's lapses
CLAIM_SQL = sa.text("""
UPDATE tickets SET recovery_lease_until = clock_timestamp() + make_interval(secs => :lease)
WHERE id = :ticket_id AND status = 'received'
  AND (recovery_lease_until IS NULL OR recovery_lease_until <= clock_timestamp())
RETURNING subject, body
""")


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
    with runtime.session() as session:  # the claim commits here: nothing is held while the answer is made
        claimed = session.execute(CLAIM_SQL, {"lease": LEASE_SECONDS, "ticket_id": ticket_id}).one_or_none()
    if claimed is None:
        return None  # answered meanwhile, or another sweeper holds it
    finish_ticket(runtime, chat, ticket_id, claimed.subject, claimed.body, started=time.perf_counter())
    with runtime.session() as session:
        return session.scalar(sa.select(Ticket.status).where(Ticket.id == ticket_id))


def owed_acknowledgements(session, *, older_than_seconds: int, limit: int) -> list[int]:
    """Answered or handed-off tickets whose acknowledgement is still owed this long after submission."""
    cutoff = sa.func.clock_timestamp() - timedelta(seconds=older_than_seconds)
    return list(session.scalars(sa.select(Ticket.id).where(Ticket.ack_pending, Ticket.status != "received",
                                                           Ticket.created_at < cutoff)
                                .order_by(Ticket.created_at, Ticket.id).limit(limit)))


def complete_acknowledgements(runtime: Runtime, *, older_than_seconds: int, limit: int = 100) -> int:
    """Queue each owed acknowledgement (with the AI's answer when there is one); how many were decided."""
    with runtime.session() as session:
        ids = owed_acknowledgements(session, older_than_seconds=older_than_seconds, limit=limit)
    for ticket_id in ids:
        with runtime.session() as session:
            view = get_ticket(session, ticket_id)
            acknowledge(session, runtime.settings, ticket_id, answer=view.answer if view.status == "answered" else None)
        log.warning("ticket %s: completed the acknowledgement a crash left owed", ticket_id)
    return len(ids)


def recover_stuck_tickets(runtime: Runtime, chat: ChatModel | None, *, older_than_seconds: int,
                          limit: int = 100) -> Recovery:
    """One sweep: every ticket stuck past ``older_than_seconds`` is answered or marked ``failed``; then every
    acknowledgement owed that long is queued."""
    with runtime.session() as session:
        ids = stuck_tickets(session, older_than_seconds=older_than_seconds, limit=limit)
    outcomes = {}
    for ticket_id in ids:
        status = recover_ticket(runtime, chat, ticket_id)
        if status is not None:
            outcomes[ticket_id] = status
            log.warning("recovered ticket %s stuck in 'received': now %s", ticket_id, status)
    complete_acknowledgements(runtime, older_than_seconds=older_than_seconds, limit=limit)
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
