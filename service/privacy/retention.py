"""Retention: raw inbound mail, solved tickets and trashed articles past their age are removed by the background
sweep, in bounded batches, each run logged and recorded in the privacy log (the dashboard counts it)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import PrivacyEvent
from service.knowledge.trash import purge_trash
from service.privacy.erase import erase_rows
from service.privacy.registry import TARGETS, ErasureTarget, rows_where
from service.runtime import Runtime

log = logging.getLogger(__name__)
BATCH = 200  # rows a transaction removes: the sweep never holds long locks on a busy table
SWEEP_SECONDS = 3600.0

# Handled mail only: a message still waiting for its first try stays whatever its age.
EXPIRED_MAIL_SQL = sa.text("""
DELETE FROM inbound_emails WHERE id IN (
    SELECT id FROM inbound_emails WHERE received_at < :cutoff AND status <> 'received'
    ORDER BY id LIMIT :batch FOR UPDATE SKIP LOCKED)
""")
# Solved (by an agent, or by the customer on the help page), and quiet since the cutoff.
EXPIRED_TICKETS_SQL = sa.text("""
SELECT t.id FROM tickets t
WHERE t.erased_at IS NULL AND (t.state = 'solved' OR (t.state IS NULL AND t.resolved_at IS NOT NULL))
  AND greatest(t.created_at, t.resolved_at,
               (SELECT max(m.created_at) FROM ticket_messages m WHERE m.ticket_id = t.id)) < :cutoff
ORDER BY t.id LIMIT :batch FOR UPDATE SKIP LOCKED
""")


@dataclass(frozen=True)
class RetentionRun:
    """What one sweep removed."""

    raw_mail: int
    tickets: int
    articles: int = 0  # purged from the trash


def retention_targets() -> list[ErasureTarget]:
    """The erasure's targets, except that candidates an admin approved or merged outlive their ticket."""
    kept = rows_where("candidates", "article_candidates",
                      "ticket_id = ANY(:ticket_ids) AND status NOT IN ('approved', 'merged')")
    return [kept if target.name == "candidates" else target for target in TARGETS]


def _cutoff(session: Session, now: datetime | None, days: int) -> datetime:
    moment = now or session.execute(sa.select(sa.func.now())).scalar_one()
    return moment - timedelta(days=days)


def expire_raw_mail(session: Session, settings: Settings, *, now: datetime | None = None,
                    batch: int = BATCH) -> int:
    """Delete one batch of handled e-mail older than RETENTION_RAW_MAIL_DAYS; how many."""
    if not settings.retention_raw_mail_days:
        return 0
    cutoff = _cutoff(session, now, settings.retention_raw_mail_days)
    removed = session.execute(EXPIRED_MAIL_SQL, {"cutoff": cutoff, "batch": batch}).rowcount
    if removed:
        session.add(PrivacyEvent(kind="retention_raw_mail", actor="retention", counts={"raw_mail": removed}))
    return removed


def expire_solved_tickets(session: Session, settings: Settings, *, now: datetime | None = None,
                          batch: int = BATCH) -> int:
    """Erase one batch of solved tickets quiet for RETENTION_SOLVED_TICKETS_DAYS; how many tickets."""
    if not settings.retention_solved_tickets_days:
        return 0
    cutoff = _cutoff(session, now, settings.retention_solved_tickets_days)
    ids = list(session.scalars(EXPIRED_TICKETS_SQL, {"cutoff": cutoff, "batch": batch}))
    if not ids:
        return 0
    # No address: only these tickets' rows go (another ticket of the same customer is kept).
    counts = erase_rows(session, None, ids, dry_run=False, targets=retention_targets())
    session.add(PrivacyEvent(kind="retention_tickets", actor="retention", counts=counts))
    return len(ids)


def purge_expired_trash(session: Session, settings: Settings, *, now: datetime | None = None,
                        batch: int = BATCH) -> int:
    """Purge one batch of articles in the trash longer than ARTICLE_TRASH_DAYS, with their history."""
    purged = purge_trash(session, settings.article_trash_days, now=now, batch=batch)
    if purged:
        session.add(PrivacyEvent(kind="trash_purge", actor="retention", counts={"articles": purged}))
    return purged


def run_retention(runtime: Runtime, *, now: datetime | None = None, batch: int = BATCH,
                  max_batches: int = 50) -> RetentionRun:
    """Batches until nothing is left (or ``max_batches``), each in its own transaction; logged."""
    totals = {"raw_mail": 0, "tickets": 0, "articles": 0}
    for name, expire in (("raw_mail", expire_raw_mail), ("tickets", expire_solved_tickets),
                         ("articles", purge_expired_trash)):
        for _ in range(max_batches):
            with runtime.session() as session:
                removed = expire(session, runtime.settings, now=now, batch=batch)
            totals[name] += removed
            if removed < batch:
                break
    log.info("retention: removed %d raw e-mails and %d solved tickets; purged %d trashed articles",
             totals["raw_mail"], totals["tickets"], totals["articles"])
    return RetentionRun(**totals)


def start_retention_thread(runtime: Runtime, *, interval_seconds: float = SWEEP_SECONDS) -> threading.Thread:
    """Sweep now, then every ``interval_seconds``, in a daemon thread that outlives every error."""

    def sweep_forever() -> None:
        while True:
            try:
                run_retention(runtime)
            except Exception:  # noqa: BLE001 - a database outage or a bug must not end the sweeping
                log.exception("retention sweep failed")
            time.sleep(interval_seconds)

    thread = threading.Thread(target=sweep_forever, name="retention", daemon=True)
    thread.start()
    return thread
