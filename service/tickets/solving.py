"""The one solved hook: whatever solved a ticket (a reply, a bulk action, the customer), the knowledge loop learns
from it the same way, after the solve is committed."""

from __future__ import annotations

import logging
from typing import Iterable

from service.runtime import Runtime
from service.tickets.learning import propose_from_solved_ticket
from service.tickets.similar import ensure_ticket_question

log = logging.getLogger(__name__)


def solve_ticket(runtime: Runtime, ticket_id: int) -> None:
    """After a solve is committed: index the question for "similar solved tickets", and propose an article
    candidate when an agent solved it with public replies.

    Each in its own transaction, so a failing embedder or language model is logged and never undoes the solve.
    """
    try:
        with runtime.session() as session:  # a solved ticket is evidence for the next like it (issue 25)
            ensure_ticket_question(session, runtime.embedder, ticket_id)
    except Exception:  # noqa: BLE001 - the solve is stored; the vector is a by-product
        log.exception("solved ticket %s: question not stored for similar tickets", ticket_id)
    try:
        with runtime.session() as session:
            propose_from_solved_ticket(session, embedder=runtime.embedder, settings=runtime.settings,
                                       chat=runtime.chat, ticket_id=ticket_id)
    except Exception:  # noqa: BLE001 - the solve is stored; the candidate is a by-product
        log.exception("no article candidate for solved ticket %s", ticket_id)


def solve_tickets(runtime: Runtime, ticket_ids: Iterable[int]) -> None:
    """``solve_ticket`` for each ticket a bulk action solved."""
    for ticket_id in ticket_ids:
        solve_ticket(runtime, ticket_id)
