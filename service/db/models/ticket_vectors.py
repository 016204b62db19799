"""``ticket_vectors`` (migration 0018): one vector per ticket question, for "similar solved tickets".

Written when a ticket is answered or escalated; ``solved_at`` is copied from the ticket when it is solved (and
cleared when it reopens), so a filtered index or scan over solved tickets needs no join. A plain table: no row is
ever loaded as an object on the hot path.
"""

from __future__ import annotations

import sqlalchemy as sa
from pgvector.sqlalchemy import HALFVEC

from service.db.models.base import Base

ticket_vectors = sa.Table(
    "ticket_vectors",
    Base.metadata,
    sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("embedding_model", sa.Text, nullable=False),
    # Unit length, the model's own width, half precision.
    sa.Column("embedding", HALFVEC(), nullable=False),
    sa.Column("solved_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    sa.Index("ticket_vectors_solved", "solved_at", postgresql_where=sa.text("solved_at IS NOT NULL")),
)

# Migration 0026: similar solved tickets at the default model's width (service.retrieval.ticket_neighbours, which
# also builds other widths' from ``supportrag db hnsw``).
sa.Index("ticket_vectors_hnsw_384", sa.cast(ticket_vectors.c.embedding, HALFVEC(384)).label("embedding_384"),
         postgresql_using="hnsw", postgresql_with={"m": 16, "ef_construction": 64},
         postgresql_ops={"embedding_384": "halfvec_cosine_ops"},
         postgresql_where=sa.text("solved_at IS NOT NULL AND vector_dims(embedding) = 384"))
