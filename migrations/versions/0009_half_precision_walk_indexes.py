"""Indexes the index walk uses, and none it does not.

Drops the 1536-d HNSW on knowledge_base.embedding: no query used it (every search was an exact scan), it took
156 MB at 20k rows and made inserts 33× slower. Adds HNSW indexes on the first 384 dimensions in half precision
(MiniLM's real dimensions; the rest is zero padding) for sections and cards, which service.retrieval.walk walks
in descending cosine, and a btree on importance (the walk's bound on any article's boost is its max).

Build settings for large tables: see the README's "Performance" section (maintenance_work_mem,
max_parallel_maintenance_workers).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

HALF = "(subvector(embedding, 1, 384)::halfvec(384)) halfvec_cosine_ops"


def upgrade() -> None:
    op.drop_index("knowledge_base_embedding_hnsw", table_name="knowledge_base")
    op.execute(f"CREATE INDEX knowledge_sections_embedding_half_hnsw ON knowledge_sections USING hnsw ({HALF})")
    op.execute(f"CREATE INDEX knowledge_base_embedding_half_hnsw ON knowledge_base USING hnsw ({HALF})")
    op.create_index("knowledge_base_importance", "knowledge_base", ["importance"])


def downgrade() -> None:
    op.drop_index("knowledge_base_importance", table_name="knowledge_base")
    op.drop_index("knowledge_base_embedding_half_hnsw", table_name="knowledge_base")
    op.drop_index("knowledge_sections_embedding_half_hnsw", table_name="knowledge_sections")
    op.execute("CREATE INDEX knowledge_base_embedding_hnsw ON knowledge_base USING hnsw (embedding vector_cosine_ops)")
