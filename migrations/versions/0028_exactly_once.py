"""Exactly once (issue 33): the first result of each reply's ``Idempotency-Key``; a ticket's owed
acknowledgement (``ack_pending``) and the recovery sweep's lease on it (``recovery_lease_until``); the BM25
recount takes the writers' lock order (the totals row first, then the terms), so a recount racing a write
cannot deadlock.

Revision ID: 0028
Revises: 0033
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0028"
down_revision = "0026"
branch_labels = None
depends_on = None


RECOUNT = """
CREATE OR REPLACE FUNCTION bm25_recount() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    {lock}DELETE FROM bm25_terms;
    INSERT INTO bm25_terms (term, df)
    SELECT u.lexeme, count(*) FROM (
        SELECT search_vector FROM knowledge_base WHERE search_vector IS NOT NULL
        UNION ALL SELECT search_vector FROM knowledge_sections WHERE search_vector IS NOT NULL
    ) AS units, unnest(units.search_vector) AS u
    GROUP BY u.lexeme;
    INSERT INTO bm25_totals AS t (id, units, total_length)
    SELECT 1, count(*), coalesce(sum(bm25_length), 0) FROM (
        SELECT bm25_length FROM knowledge_base WHERE search_vector IS NOT NULL
        UNION ALL SELECT bm25_length FROM knowledge_sections WHERE search_vector IS NOT NULL
    ) AS units
    ON CONFLICT (id) DO UPDATE SET units = EXCLUDED.units, total_length = EXCLUDED.total_length;
END $$;
"""
# As bm25_apply (migration 0014): the totals row first, before any term.
WRITERS_ORDER = "PERFORM 1 FROM bm25_totals WHERE id = 1 FOR UPDATE;\n    "


def upgrade() -> None:
    op.execute(RECOUNT.format(lock=WRITERS_ORDER))
    op.create_table(
        "reply_idempotency_keys",
        sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("response", JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.add_column("tickets", sa.Column("ack_pending", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("tickets", sa.Column("recovery_lease_until", sa.DateTime(timezone=True), nullable=True))
    op.create_index("tickets_ack_pending", "tickets", ["created_at"], postgresql_where=sa.text("ack_pending"))


def downgrade() -> None:
    op.execute(RECOUNT.format(lock=""))
    op.drop_index("tickets_ack_pending", table_name="tickets")
    op.drop_column("tickets", "recovery_lease_until")
    op.drop_column("tickets", "ack_pending")
    op.drop_table("reply_idempotency_keys")
