"""Similar solved tickets: the nearest ticket questions (``ticket_vectors``, migration 0018) to a vector.

An exact scan for now, over solved tickets of the model only; the ``ticket_vectors_solved`` partial index keeps the
scan to solved rows. The query is sent once in full precision at the model's width and compared in half
precision, as the stored vectors are (unit length, ``l2_normalize(…)::halfvec``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

HALF_QUERY = "CAST(l2_normalize(CAST(:query_vector AS vector)) AS halfvec)"

# Best first; ties by the older ticket. ``:exclude`` is the ticket asking (never its own neighbour), or NULL.
NEIGHBOURS_SQL = sa.text(f"""
SELECT tv.ticket_id, 1.0 - (tv.embedding <=> {HALF_QUERY}) AS similarity
FROM ticket_vectors tv
WHERE tv.solved_at IS NOT NULL
  AND tv.embedding_model = :model
  AND tv.ticket_id IS DISTINCT FROM CAST(:exclude AS bigint)
ORDER BY tv.embedding <=> {HALF_QUERY}, tv.ticket_id
LIMIT :limit
""")


@dataclass(frozen=True)
class TicketNeighbour:
    """A solved ticket near the query, with its cosine similarity."""

    ticket_id: int
    similarity: float


def find_similar_tickets(session: Session, vector: np.ndarray, *, model: str, limit: int,
                         exclude_ticket_id: int | None = None) -> list[TicketNeighbour]:
    """The ``limit`` solved tickets whose question is nearest ``vector`` (embedded by ``model``), best first."""
    rows = session.execute(NEIGHBOURS_SQL, {"query_vector": np.asarray(vector, dtype=np.float32), "model": model,
                                            "exclude": exclude_ticket_id, "limit": limit}).all()
    return [TicketNeighbour(int(ticket_id), float(similarity)) for ticket_id, similarity in rows]
