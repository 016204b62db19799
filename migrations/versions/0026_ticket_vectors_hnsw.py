"""An HNSW index for "similar solved tickets" at the default model's width (all-MiniLM-L6-v2: 384).

An expression index on ``embedding::halfvec(384)`` (cosine), partial on solved rows of that width, so that a
million past tickets answer in milliseconds (service.retrieval.ticket_neighbours). Built here while the table is
still small; pgvector then maintains it on every insert. Another model's width gets its index from
``supportrag db hnsw``.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-02
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

WIDTH = 384  # all-MiniLM-L6-v2, the default local model


def upgrade() -> None:
    op.execute(f"""
        CREATE INDEX IF NOT EXISTS ticket_vectors_hnsw_{WIDTH} ON ticket_vectors USING hnsw
        ((embedding::halfvec({WIDTH})) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)
        WHERE solved_at IS NOT NULL AND vector_dims(embedding) = {WIDTH}
    """)


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS ticket_vectors_hnsw_{WIDTH}")
