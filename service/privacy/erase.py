"""Erase one customer: every row the registry names, in one transaction, and the fact kept without the address."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from service.db.locks import lock_customer_address
from service.db.models import PrivacyEvent, Ticket
from service.privacy.registry import TARGETS, ErasureTarget
from service.tickets.answering import HANDOFF_MESSAGE
from service.tickets.states import SYSTEM, apply_event

log = logging.getLogger(__name__)
EMAIL_MAX = 320
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")

CUSTOMER_TICKETS_SQL = sa.text("""
SELECT id FROM tickets WHERE lower(customer_email) = :email ORDER BY id FOR UPDATE
""")


class InvalidEmail(ValueError):
    """Not an e-mail address."""


def normalise_email(email: object) -> str:
    """The address in lower case, or InvalidEmail."""
    if not isinstance(email, str) or len(email) > EMAIL_MAX or not _EMAIL.fullmatch(email.strip()):
        raise InvalidEmail("must be an e-mail address")
    return email.strip().lower()


@dataclass(frozen=True)
class ErasureReport:
    """How many rows of each kind went (or would go, on a dry run)."""

    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Rows of every kind."""
        return sum(self.counts.values())

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"dry_run": self.dry_run, "counts": self.counts}


def lock_customer(session: Session, email: str) -> list[int]:
    """Take the address's lock (inbound e-mail takes it too) and lock its tickets; returns their ids."""
    lock_customer_address(session, email)
    return list(session.scalars(CUSTOMER_TICKETS_SQL, {"email": email}))


def _params(email: str | None, ticket_ids: list[int]) -> dict:
    return {"email": email, "ticket_ids": ticket_ids, "handoff": HANDOFF_MESSAGE}


def _bind(sql: str) -> sa.TextClause:
    statement = sa.text(sql)
    if ":ticket_ids" not in sql:  # e.g. the batches a previous line emptied
        return statement
    return statement.bindparams(sa.bindparam("ticket_ids", type_=ARRAY(sa.BigInteger)))


def erase_rows(session: Session, email: str | None, ticket_ids: list[int], *, dry_run: bool,
               targets: list[ErasureTarget] | None = None) -> dict[str, int]:
    """Count or erase every target's rows for this customer (already locked); the counts by kind.

    ``email`` None: only the rows of ``ticket_ids`` (retention), since no predicate matches a NULL address.
    """
    params, counts = _params(email, ticket_ids), {}
    for target in targets if targets is not None else TARGETS:
        if dry_run:
            counts[target.name] = session.execute(_bind(target.count_sql), params).scalar_one()
        else:
            counts[target.name] = session.execute(_bind(target.erase_sql), params).rowcount
    return counts


def close_worked_tickets(session: Session, ticket_ids: list[int], *, dry_run: bool) -> int:
    """Take the customer's open or pending tickets out of the agents' queue: solved by the system on an "erased"
    transition (an erased ticket has nothing left to answer); returns how many (would) close."""
    tickets = list(session.scalars(sa.select(Ticket).where(Ticket.id.in_(ticket_ids),
                                                           Ticket.state.in_(("open", "pending")))))
    if not dry_run:
        for ticket in tickets:
            apply_event(session, ticket, "erased", SYSTEM)
        session.flush()  # before the text statements that anonymise the same rows
    return len(tickets)


def erase_customer(session: Session, email: str, *, actor: str | None, dry_run: bool = False) -> ErasureReport:
    """Erase (or count, on a dry run) everything stored about ``email``; the caller commits.

    The audit row keeps when, who and how many rows of each kind, never the address.
    """
    address = normalise_email(email)
    ticket_ids = lock_customer(session, address)
    closed = close_worked_tickets(session, ticket_ids, dry_run=dry_run)
    counts = erase_rows(session, address, ticket_ids, dry_run=dry_run) | {"closed_tickets": closed}
    if not dry_run:
        session.add(PrivacyEvent(kind="erase", actor=actor, counts=counts))
        session.flush()
        log.info("erased a customer: %s", ", ".join(f"{name}={n}" for name, n in counts.items() if n))
    return ErasureReport(dry_run, counts)
