"""Full-text search leg, synonym groups, and import bookkeeping (source path + file hash).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Title weighted above content; 'english' stems ("refunds" finds "refund").
SEARCH_VECTOR = (
    "setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A') || "
    "setweight(to_tsvector('english'::regconfig, coalesce(content, '')), 'B')"
)

DEFAULT_SYNONYMS = [
    ["refund", "money back", "reimbursement"],
    ["password", "login credentials", "passcode"],
    ["shipping", "delivery"],
    ["order", "purchase"],
    ["log in", "sign in", "login"],
    ["cancel", "cancellation"],
    ["website", "site", "web page"],
    ["card", "credit card", "debit card"],
]


def upgrade() -> None:
    op.add_column("knowledge_base", sa.Column(
        "search_vector", postgresql.TSVECTOR, sa.Computed(SEARCH_VECTOR, persisted=True), nullable=True))
    op.create_index("knowledge_base_search_vector", "knowledge_base", ["search_vector"], postgresql_using="gin")
    op.add_column("knowledge_base", sa.Column("source_path", sa.Text, nullable=True))
    op.add_column("knowledge_base", sa.Column("source_sha256", sa.Text, nullable=True))
    op.create_index("knowledge_base_source_path", "knowledge_base", ["source_path"], unique=True)
    synonyms = op.create_table(
        "synonym_groups",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("terms", postgresql.ARRAY(sa.Text), nullable=False),
        sa.CheckConstraint("cardinality(terms) >= 2", name="synonym_groups_two_terms"),
    )
    op.bulk_insert(synonyms, [{"terms": group} for group in DEFAULT_SYNONYMS])


def downgrade() -> None:
    op.drop_table("synonym_groups")
    op.drop_index("knowledge_base_source_path", table_name="knowledge_base")
    op.drop_column("knowledge_base", "source_sha256")
    op.drop_column("knowledge_base", "source_path")
    op.drop_index("knowledge_base_search_vector", table_name="knowledge_base")
    op.drop_column("knowledge_base", "search_vector")
