"""The knowledge loop's hook on the agent side: a ticket an agent solved with public replies proposes an article.

Called by the views that solve tickets, after the solve is committed: a candidate that fails (embedder or
language model down) is logged and never undoes the agent's reply.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import Ticket, TicketMessage
from service.knowledge.candidates import CandidateView, propose_candidate
from service.providers.embeddings import Embedder
from service.providers.llm import ChatModel
from service.tickets.names import known_names

log = logging.getLogger(__name__)


def public_agent_replies(session: Session, ticket_id: int) -> list[str]:
    """The agent's public replies on the ticket, oldest first (never internal notes nor the customer's text)."""
    return list(session.scalars(
        sa.select(TicketMessage.body)
        .where(TicketMessage.ticket_id == ticket_id, TicketMessage.kind == "agent_reply")
        .order_by(TicketMessage.created_at, TicketMessage.id)))


def propose_from_solved_ticket(session: Session, *, embedder: Embedder, settings: Settings,
                               chat: ChatModel | None, ticket_id: int) -> CandidateView | None:
    """A pending candidate when an agent solved the ticket with at least one public reply; else None."""
    ticket = session.get(Ticket, ticket_id)
    if ticket is None or ticket.state != "solved" or ticket.solved_by != "agent":
        return None
    replies = public_agent_replies(session, ticket_id)
    if not replies:
        return None
    return propose_candidate(session, embedder=embedder, settings=settings, chat=chat, ticket_id=ticket_id,
                             question=ticket.body, reply_bodies=replies,
                             names=known_names(session, [ticket_id])[ticket_id])
