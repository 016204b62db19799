"""A btree on articles' importance: the lexical mode's pruned BM25 leg bounds any article's boost by the largest
importance (service.retrieval.bm25_prune), which the index reads in one step instead of a scan of every article.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("knowledge_base_importance", "knowledge_base", ["importance"])


def downgrade() -> None:
    op.drop_index("knowledge_base_importance", table_name="knowledge_base")
