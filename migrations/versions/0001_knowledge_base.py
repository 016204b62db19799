"""Knowledge base: vector extension, knowledge_base table with HNSW index, app_state.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import VECTOR

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "knowledge_base",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("category", sa.Text, nullable=True),
        sa.Column("embedding", VECTOR(1536), nullable=True),
        sa.Column("importance", sa.Double, nullable=False, server_default=sa.text("1.0")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("embedding_model", sa.Text, nullable=True),
        sa.Column("content_sha256", sa.Text, nullable=True),
        sa.CheckConstraint("importance >= 0.0 AND importance <= 2.0", name="knowledge_base_importance_range"),
        sa.CheckConstraint("char_length(title) BETWEEN 1 AND 300", name="knowledge_base_title_length"),
        sa.CheckConstraint("char_length(content) BETWEEN 1 AND 100000", name="knowledge_base_content_length"),
        sa.CheckConstraint(
            "category IS NULL OR char_length(category) <= 64", name="knowledge_base_category_length"
        ),
    )
    # A 1536-d vector is ~6 KB, over the 2 KB TOAST threshold: by default it would be
    # moved out of line and every exact scan would pay a TOAST fetch per row.
    # PLAIN keeps it in the heap page (bench/toast_storage.py measures the difference).
    op.execute("ALTER TABLE knowledge_base ALTER COLUMN embedding SET STORAGE PLAIN")
    op.create_index(
        "knowledge_base_embedding_hnsw",
        "knowledge_base",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index("knowledge_base_embedding_model", "knowledge_base", ["embedding_model"])
    op.create_table(
        "app_state",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("app_state")
    op.drop_index("knowledge_base_embedding_model", table_name="knowledge_base")
    op.drop_index("knowledge_base_embedding_hnsw", table_name="knowledge_base")
    op.drop_table("knowledge_base")
    # The vector extension stays: other schemas or databases objects may use it.
