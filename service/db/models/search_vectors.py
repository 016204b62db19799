"""``search_vectors`` (migration 0016): every embedded card and section, narrowed to what the exact scan reads.

Not written by the application: triggers on ``knowledge_base`` and ``knowledge_sections`` keep it equal to them
on every write (insert, COPY, update, delete and its FK cascade, truncate). Read by service.retrieval.vector_legs
(the scan) and service.retrieval.approximate (its HNSW index). A plain table, not an ORM class: no row of it is
ever loaded as an object.
"""

from __future__ import annotations

import sqlalchemy as sa
from pgvector.sqlalchemy import HALFVEC

from service.db.models.base import Base

search_vectors = sa.Table(
    "search_vectors",
    Base.metadata,
    sa.Column("article_id", sa.BigInteger, nullable=False),
    sa.Column("section_id", sa.BigInteger, nullable=True),  # NULL: the article's own vector (its card)
    sa.Column("embedding_model", sa.Text, nullable=False),
    # Unit length, the model's width, half precision: a card's knowledge_base.embedding_half, a section's
    # l2_normalize(embedding)::halfvec.
    sa.Column("embedding_half", HALFVEC(), nullable=False),
    sa.Index("search_vectors_article", "article_id"),
    sa.Index("search_vectors_section", "section_id", unique=True),
)
