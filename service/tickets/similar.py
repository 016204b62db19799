"""Similar solved tickets as evidence for agents (issue 25 item 3): each ticket's question is embedded when it is
answered or escalated; a solved one, with the agent's public reply that solved it, is evidence for a new ticket.

Agents only: the customers' answer gate reads articles alone. Texts are scrubbed as article candidates are.
Use cases take a session and never commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Ticket, TicketMessage, ticket_vectors
from service.knowledge.scrubbing import scrub_personal_data, scrub_reply
from service.providers.embeddings import Embedder, EmbeddingError, embed_narrow
from service.retrieval.ticket_neighbours import find_similar_tickets
from service.tickets.names import known_names
from service.tickets.answering import ticket_query

log = logging.getLogger(__name__)
# A solved ticket without an agent's public reply (solved by the customer with the AI's answer) is not
# evidence: the candidates are over-fetched by this many so that dropping those still fills the list.
OVERFETCH = 10
# Stored as the article vectors are: unit length, half precision. A re-embedding keeps the solve time.
UPSERT_SQL = sa.text("""
INSERT INTO ticket_vectors (ticket_id, embedding_model, embedding, solved_at)
VALUES (:ticket_id, :model, CAST(l2_normalize(CAST(:vector AS vector)) AS halfvec),
        CASE WHEN :solved THEN now() END)
ON CONFLICT (ticket_id) DO UPDATE
SET embedding_model = EXCLUDED.embedding_model, embedding = EXCLUDED.embedding,
    solved_at = CASE WHEN EXCLUDED.solved_at IS NOT NULL THEN coalesce(ticket_vectors.solved_at, EXCLUDED.solved_at) END
""")


@dataclass(frozen=True)
class SimilarTicket:
    """A solved ticket like this one: its question and the agent's reply that solved it, both scrubbed."""

    ticket_id: int
    similarity: float
    question: str
    reply: str
    solved_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ticket_id": self.ticket_id, "similarity": round(self.similarity, 4), "question": self.question,
                "reply": self.reply, "solved_at": self.solved_at.isoformat()}


def embed_ticket_question(embedder: Embedder, ticket: Ticket) -> np.ndarray:
    """The ticket's question at the model's width (the text retrieval searches with); EmbeddingError on failure."""
    return embed_narrow(embedder, [ticket_query(ticket.subject, ticket.body)])[0]


def store_ticket_vector(session: Session, ticket: Ticket, vector: np.ndarray, model: str) -> None:
    """Insert or replace the ticket's vector; ``solved_at`` follows the ticket's state."""
    session.execute(UPSERT_SQL, {"ticket_id": ticket.id, "model": model, "solved": ticket.state == "solved",
                                 "vector": np.asarray(vector, dtype=np.float32)})


def remember_ticket_question(session: Session, embedder: Embedder, ticket_id: int) -> bool:
    """Embed and store the ticket's question; a failing embedder is logged and returns False (never raises)."""
    ticket = session.get(Ticket, ticket_id)
    try:
        vector = embed_ticket_question(embedder, ticket)
    except EmbeddingError as exc:
        log.warning("ticket %s: question not embedded for similar tickets: %s", ticket_id, exc)
        return False
    store_ticket_vector(session, ticket, vector, embedder.model_name)
    return True


def ensure_ticket_question(session: Session, embedder: Embedder, ticket_id: int) -> bool:
    """Embed the question now if it never was (a ticket from before, or an embedder that failed then)."""
    exists = session.scalar(sa.select(ticket_vectors.c.ticket_id).where(ticket_vectors.c.ticket_id == ticket_id))
    return exists is not None or remember_ticket_question(session, embedder, ticket_id)


def follow_solved_state(session: Session, ticket_id: int, solved: bool) -> None:
    """Keep ``ticket_vectors.solved_at`` in step with the ticket: set when solved, cleared when it reopens."""
    session.execute(sa.update(ticket_vectors).where(ticket_vectors.c.ticket_id == ticket_id)
                    .values(solved_at=sa.func.now() if solved else None))


def _solving_replies(session: Session, ticket_ids: list[int]) -> dict[int, str]:
    """Each ticket's latest public agent reply (the one that solved it)."""
    latest = (sa.select(sa.func.max(TicketMessage.id))
              .where(TicketMessage.ticket_id.in_(ticket_ids), TicketMessage.kind == "agent_reply")
              .group_by(TicketMessage.ticket_id))
    rows = session.execute(sa.select(TicketMessage.ticket_id, TicketMessage.body)
                           .where(TicketMessage.id.in_(latest))).all()
    return dict(rows)


def _scrubbed(text: str, ticket_id: int, names: dict[int, list[str]]) -> str:
    """Another customer's text as an agent may see it: no name, greeting, sign-off, number or address of theirs."""
    return scrub_reply(scrub_personal_data(text, ticket_id=ticket_id), names=names.get(ticket_id, []))


def similar_tickets_for_vector(session: Session, vector: np.ndarray, *, model: str, limit: int,
                               exclude_ticket_id: int | None = None) -> list[SimilarTicket]:
    """Solved tickets near ``vector`` that an agent's public reply solved, best first, texts scrubbed."""
    neighbours = find_similar_tickets(session, vector, model=model, limit=limit + OVERFETCH,
                                      exclude_ticket_id=exclude_ticket_id)
    ids = [n.ticket_id for n in neighbours]
    replies = _solving_replies(session, ids)
    rows = {row.id: row for row in session.execute(
        sa.select(Ticket.id, Ticket.body, ticket_vectors.c.solved_at)
        .join(ticket_vectors, ticket_vectors.c.ticket_id == Ticket.id).where(Ticket.id.in_(ids)))}
    names = known_names(session, ids)
    found = [SimilarTicket(n.ticket_id, n.similarity, _scrubbed(rows[n.ticket_id].body, n.ticket_id, names),
                           _scrubbed(replies[n.ticket_id], n.ticket_id, names), rows[n.ticket_id].solved_at)
             for n in neighbours if n.ticket_id in replies and n.ticket_id in rows]
    return found[:limit]


def similar_solved_tickets(session: Session, embedder: Embedder, ticket: Ticket, *, limit: int) -> list[SimilarTicket]:
    """The solved tickets most like ``ticket`` (never itself); empty when the embedder fails."""
    try:
        vector = embed_ticket_question(embedder, ticket)
    except EmbeddingError as exc:
        log.warning("ticket %s: no similar tickets, embedding failed: %s", ticket.id, exc)
        return []
    return similar_tickets_for_vector(session, vector, model=embedder.model_name, limit=limit,
                                      exclude_ticket_id=ticket.id)
