"""The one ticket list: queues, full-text search over subject and thread, filters, bulk actions, the customer's
history. Use cases: they take a session and never commit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import TICKET_STATUSES, WORK_STATES, AdminUser, Ticket, TicketCitation, TicketMessage, TicketTag
from service.tickets.presence import unread_expression
from service.tickets.queries import ticket_views
from service.tickets.states import Actor, apply_event
from service.tickets.tags import ticket_tags
from service.tickets.work import WorkItem, work_ticket
from service.validation import ValidationError

QUEUES = ("mine", "unassigned", "open", "pending", "solved", "all", "overdue")
BY_DUE = ("mine", "unassigned", "open", "overdue")  # work queues: the most urgent first; the others newest first
BULK_ACTIONS = ("assign", "solve")
BULK_MAX = 100
SEARCH_CONFIG = "english"  # as the stored tsvectors (migration 0023)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
UNASSIGNED = -1  # ``assignee_id`` filter value meaning "nobody"


@dataclass(frozen=True)
class TicketFilters:
    """What the list shows: a queue, optionally narrowed (every field but ``queue`` is optional)."""

    queue: str = "all"
    q: str | None = None
    state: str | None = None
    assignee_id: int | None = None  # UNASSIGNED: nobody
    tag: str | None = None
    since: date | None = None
    until: date | None = None  # inclusive
    status: str | None = None  # the AI's status
    article_id: int | None = None
    customer: str | None = None  # one customer's address (any case)


@dataclass(frozen=True)
class DeskItem:
    """A row of the list: the ticket with its work fields, tags, and whether its assignee has unread messages."""

    work: WorkItem
    tags: list[str] = field(default_factory=list)
    unread: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the queue's fields plus tags and unread)."""
        return self.work.to_dict() | {"tags": self.tags, "unread": self.unread}


def parse_day(name: str, raw: str | None) -> date | None:
    """``YYYY-MM-DD`` or None; anything else is a ValidationError naming ``name``."""
    if not raw:
        return None
    try:
        if _DAY.fullmatch(raw):
            return date.fromisoformat(raw)
    except ValueError:
        pass
    raise ValidationError("invalid date", {name: "must be a date, YYYY-MM-DD"})


def _queue_clauses(queue: str, user_id: int | None) -> list[Any]:
    if queue not in QUEUES:
        raise ValidationError("invalid queue", {"queue": f"must be one of {', '.join(QUEUES)}"})
    is_open = Ticket.state == "open"
    return {
        # An agent's own tickets are theirs until solved: pending ones (waiting on the customer) included.
        "mine": [Ticket.state.in_(("open", "pending")), Ticket.assignee_id == user_id] if user_id else [sa.false()],
        "unassigned": [is_open, Ticket.assignee_id.is_(None)],
        "open": [is_open],
        "pending": [Ticket.state == "pending"],
        "solved": [Ticket.state == "solved"],
        "all": [],
        "overdue": [is_open, Ticket.due_at < sa.func.now()],
    }[queue]


def customer_clause(address: str) -> Any:
    """Tickets from one customer address, whatever its case (index ``tickets_customer_email_lower``)."""
    return sa.func.lower(Ticket.customer_email) == address.strip().lower()


def _search_clause(q: str) -> Any:
    """Tickets whose subject or any thread message matches ``q`` (web-search syntax), or whose customer address
    is ``q``; each side uses its index. A ``q`` holding an ``@`` also matches part of an address (``@acme.com``)."""
    query = sa.func.websearch_to_tsquery(sa.literal(SEARCH_CONFIG).cast(sa.dialects.postgresql.REGCONFIG), q)
    by_customer = customer_clause(q)
    if "@" in q:
        by_customer = sa.or_(by_customer, sa.func.strpos(sa.func.lower(Ticket.customer_email), q.lower()) > 0)
    return Ticket.id.in_(sa.union(
        sa.select(Ticket.id).where(Ticket.search_vector.op("@@")(query)),
        sa.select(TicketMessage.ticket_id).where(TicketMessage.search_vector.op("@@")(query)),
        sa.select(Ticket.id).where(by_customer)))


def filter_clauses(filters: TicketFilters, user_id: int | None) -> list[Any]:
    """The WHERE clauses for ``filters``; ``user_id`` is "me" (None for a token)."""
    where = _queue_clauses(filters.queue, user_id)
    if filters.state is not None:
        if filters.state not in (*WORK_STATES, "none"):
            raise ValidationError("invalid filter", {"state": f"must be one of {', '.join(WORK_STATES)}, none"})
        where.append(Ticket.state.is_(None) if filters.state == "none" else Ticket.state == filters.state)
    if filters.status is not None:
        if filters.status not in TICKET_STATUSES:
            raise ValidationError("invalid filter", {"status": f"must be one of {', '.join(TICKET_STATUSES)}"})
        where.append(Ticket.status == filters.status)
    if filters.assignee_id is not None:
        where.append(Ticket.assignee_id.is_(None) if filters.assignee_id == UNASSIGNED
                     else Ticket.assignee_id == filters.assignee_id)
    if filters.tag:
        where.append(Ticket.id.in_(sa.select(TicketTag.ticket_id).where(TicketTag.tag == filters.tag.lower())))
    if filters.since:
        where.append(Ticket.created_at >= datetime.combine(filters.since, datetime.min.time()))
    if filters.until and filters.until < date.max:
        where.append(Ticket.created_at < datetime.combine(filters.until + timedelta(days=1), datetime.min.time()))
    if filters.article_id is not None:
        where.append(Ticket.id.in_(sa.select(TicketCitation.ticket_id)
                                   .where(TicketCitation.article_id == filters.article_id)))
    if filters.customer and filters.customer.strip():
        where.append(customer_clause(filters.customer))
    if filters.q and filters.q.strip():
        where.append(_search_clause(filters.q.strip()))
    return where


def list_desk(session: Session, filters: TicketFilters, *, user_id: int | None, page: int = 1,
              per_page: int = 20) -> tuple[list[DeskItem], int]:
    """One page of the list and the total; work queues by due time, the rest newest first."""
    where = filter_clauses(filters, user_id)
    total = session.execute(sa.select(sa.func.count()).select_from(Ticket).where(*where)).scalar_one()
    order = ([Ticket.due_at.asc().nulls_last(), Ticket.id] if filters.queue in BY_DUE else [Ticket.id.desc()])
    rows = session.execute(
        sa.select(Ticket, AdminUser.username, (Ticket.due_at < sa.func.now()).label("overdue"),
                  unread_expression().label("unread"))
        .outerjoin(AdminUser, AdminUser.id == Ticket.assignee_id).where(*where)
        .order_by(*order).offset((page - 1) * per_page).limit(per_page)).all()
    views = ticket_views(session, [row[0] for row in rows])
    tags = ticket_tags(session, [row[0].id for row in rows])
    return [DeskItem(WorkItem(view, name, t.opened_at, t.due_at, bool(overdue) and t.state == "open"),
                     tags[t.id], bool(unread))
            for view, (t, name, overdue, unread) in zip(views, rows)], total


def queue_counts(session: Session, user_id: int | None) -> dict[str, int]:
    """How many tickets each queue holds, in one statement."""
    columns = [sa.func.count().filter(sa.and_(sa.true(), *_queue_clauses(q, user_id))).label(q) for q in QUEUES]
    return dict(session.execute(sa.select(*columns).select_from(Ticket)).mappings().one())


@dataclass(frozen=True)
class HistoryItem:
    """Another ticket from the same customer."""

    id: int
    subject: str
    state: str | None
    status: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "subject": self.subject, "state": self.state, "status": self.status,
                "created_at": self.created_at.isoformat()}


def customer_history(session: Session, ticket_id: int, *, limit: int = 20) -> list[HistoryItem]:
    """The other tickets from the ticket's customer address (any case), newest first (none without an address)."""
    ticket = work_ticket(session, ticket_id)
    if not ticket.customer_email:
        return []
    rows = session.execute(sa.select(Ticket.id, Ticket.subject, Ticket.state, Ticket.status, Ticket.created_at)
                           .where(customer_clause(ticket.customer_email), Ticket.id != ticket_id)
                           .order_by(Ticket.id.desc()).limit(limit)).all()
    return [HistoryItem(*row) for row in rows]


def clean_ticket_ids(raw: Any) -> list[int]:
    """1 to BULK_MAX positive whole numbers (JSON's ``7.0`` is 7, as JSON Schema's integer allows)."""
    def whole(value: Any) -> bool:
        return not isinstance(value, bool) and (isinstance(value, int) or isinstance(value, float)
                                                and value.is_integer()) and value > 0
    if not isinstance(raw, list) or not 1 <= len(raw) <= BULK_MAX or not all(whole(i) for i in raw):
        raise ValidationError("invalid bulk action", {"ids": f"must be a list of 1 to {BULK_MAX} ticket ids"})
    return [int(i) for i in raw]


def bulk_update(session: Session, ticket_ids: Any, action: Any, *, agent: Actor,
                assignee_id: int | None = None) -> list[int]:
    """Assign (``assignee_id``, None: unassign) or solve (without a reply) many tickets; returns the ids changed."""
    if action not in BULK_ACTIONS:
        raise ValidationError("invalid bulk action", {"action": f"must be one of {', '.join(BULK_ACTIONS)}"})
    # Locked in id order whatever order the client sent: two bulk actions over the same tickets take turns
    # instead of deadlocking, and each reads the state it changes under the row lock.
    tickets = [work_ticket(session, i, lock=True) for i in sorted(set(clean_ticket_ids(ticket_ids)))]
    changed = []
    for ticket in tickets:
        if action == "assign" and ticket.assignee_id != assignee_id:
            ticket.assignee_id = assignee_id
            changed.append(ticket.id)
        elif action == "solve" and ticket.state != "solved":
            apply_event(session, ticket, "agent_set_state", agent, requested="solved")
            changed.append(ticket.id)
    session.flush()
    return changed
