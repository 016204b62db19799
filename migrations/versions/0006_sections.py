"""Sections: an article's embedded parts (markdown sections, windows of long ones); cited section per ticket.

Existing articles get their sections from `supportrag reembed` after this upgrade (embedding needs the model,
which a migration does not load); until then they are found by their own vector as before.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "knowledge_sections",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("article_id", sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("heading_path", ARRAY(sa.Text), nullable=False, server_default="{}"),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False, server_default="text"),
        sa.Column("char_start", sa.Integer, nullable=False),
        sa.Column("char_end", sa.Integer, nullable=False),
        sa.Column("content_sha256", sa.Text, nullable=False),
        sa.Column("embedding", VECTOR(1536), nullable=True),
        sa.Column("embedding_model", sa.Text, nullable=True),
        sa.UniqueConstraint("article_id", "ordinal", name="knowledge_sections_article_ordinal"),
        sa.CheckConstraint("char_start >= 0 AND char_end >= char_start", name="knowledge_sections_span"),
        sa.CheckConstraint("kind IN ('text', 'heading')", name="knowledge_sections_kind"),
    )
    # In the heap page, like knowledge_base.embedding: an exact scan reads no TOAST.
    op.execute("ALTER TABLE knowledge_sections ALTER COLUMN embedding SET STORAGE PLAIN")
    op.add_column("ticket_citations", sa.Column("section_label", sa.Text, nullable=True))
    op.add_column("ticket_citations", sa.Column("section_similarity", sa.Double, nullable=True))


def downgrade() -> None:
    op.drop_column("ticket_citations", "section_similarity")
    op.drop_column("ticket_citations", "section_label")
    op.drop_table("knowledge_sections")
