"""A narrow table of every vector the exact scan reads: ``search_vectors``.

The default search scanned ``embedding_half`` inside ``knowledge_sections`` and ``knowledge_base``, whose rows
also hold the text, the tsvector, the hash (and, in line or as a TOAST pointer, the full-precision vector), and
joined every section to its eligible article before aggregating. ``search_vectors`` holds one row per embedded
card and section, and only what the scan reads: ``(article_id, section_id, embedding_model, embedding_half)``
(``section_id`` NULL for the card), 910 heap bytes a 384-d vector. One scan now covers cards and sections, and
eligibility is joined after the per-article aggregate (service.retrieval.vector_legs); the approximate mode's
HNSW indexes are built on it (service.retrieval.approximate). Measured, the scan's time is nearly all the
half-precision cosines themselves (README, Performance), so the gain over 0015 is small.

``knowledge_sections.embedding_half`` (0015's generated copy) goes: nothing reads it any more. A section row of a
short section then fits under the 2 KB TOAST threshold with its full-precision vector in line (no TOAST row per
section on ingest; a re-score reads one heap row).

Statement-level AFTER triggers with transition tables keep it equal to the base tables whoever writes (the
indexing use case, a bulk COPY, a re-embed, a plain UPDATE, a delete and its FK cascade, TRUNCATE): a COPY pays
one INSERT … SELECT per statement, not one trigger call per row. A section's half-precision copy is computed
here from its full-precision vector (``l2_normalize(embedding)::halfvec``), as 0015's generated column did; a
card's is ``knowledge_base.embedding_half``, written by the indexing use case.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import HALFVEC

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

SECTION_HALF = "l2_normalize(n.embedding)::halfvec"
# The statement's new sections that have a vector, copied in (on insert, and again on update).
INSERT_SECTIONS = f"""INSERT INTO search_vectors (article_id, section_id, embedding_model, embedding_half)
    SELECT n.article_id, n.id, n.embedding_model, {SECTION_HALF}
    FROM new_rows n WHERE n.embedding IS NOT NULL AND n.embedding_model IS NOT NULL;"""

FUNCTIONS = f"""
CREATE FUNCTION search_vectors_sections_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {INSERT_SECTIONS}
    RETURN NULL;
END $$;

CREATE FUNCTION search_vectors_sections_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM search_vectors v USING old_rows o WHERE v.section_id = o.id;
    RETURN NULL;
END $$;

-- Sections are replaced (deleted, then copied in) by the indexing use case; a plain UPDATE is rare.
CREATE FUNCTION search_vectors_sections_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM search_vectors v USING old_rows o WHERE v.section_id = o.id;
    {INSERT_SECTIONS}
    RETURN NULL;
END $$;

CREATE FUNCTION search_vectors_sections_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM search_vectors WHERE section_id IS NOT NULL;
    RETURN NULL;
END $$;

CREATE FUNCTION search_vectors_cards_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_vectors (article_id, section_id, embedding_model, embedding_half)
    SELECT n.id, NULL, n.embedding_model, n.embedding_half
    FROM new_rows n WHERE n.embedding_half IS NOT NULL AND n.embedding_model IS NOT NULL;
    RETURN NULL;
END $$;

-- The article's card and sections (the sections' own rows also go with the FK cascade's delete).
CREATE FUNCTION search_vectors_cards_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM search_vectors v USING old_rows o WHERE v.article_id = o.id;
    RETURN NULL;
END $$;

-- Most updates (importance, title, review dates) leave the card's vector as it was: a join, nothing else.
CREATE FUNCTION search_vectors_cards_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM search_vectors v
    USING old_rows o JOIN new_rows n ON n.id = o.id
    WHERE v.article_id = o.id AND v.section_id IS NULL
      AND (o.embedding_half IS DISTINCT FROM n.embedding_half OR o.embedding_model IS DISTINCT FROM n.embedding_model);
    INSERT INTO search_vectors (article_id, section_id, embedding_model, embedding_half)
    SELECT n.id, NULL, n.embedding_model, n.embedding_half
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.embedding_half IS NOT NULL AND n.embedding_model IS NOT NULL
      AND (o.embedding_half IS DISTINCT FROM n.embedding_half OR o.embedding_model IS DISTINCT FROM n.embedding_model);
    RETURN NULL;
END $$;

-- Every article gone: every vector goes, and the table's pages with them.
CREATE FUNCTION search_vectors_cards_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE search_vectors;
    RETURN NULL;
END $$;
"""

# event: (transition tables, the function's suffix)
TRIGGERS = {"insert": ("NEW TABLE AS new_rows", "inserted"), "delete": ("OLD TABLE AS old_rows", "deleted"),
            "update": ("OLD TABLE AS old_rows NEW TABLE AS new_rows", "updated")}
KINDS = {"knowledge_sections": "sections", "knowledge_base": "cards"}

BACKFILL = f"""
INSERT INTO search_vectors (article_id, section_id, embedding_model, embedding_half)
SELECT kb.id, NULL, kb.embedding_model, kb.embedding_half FROM knowledge_base kb
WHERE kb.embedding_half IS NOT NULL AND kb.embedding_model IS NOT NULL
UNION ALL
SELECT n.article_id, n.id, n.embedding_model, {SECTION_HALF} FROM knowledge_sections n
WHERE n.embedding IS NOT NULL AND n.embedding_model IS NOT NULL
"""


def upgrade() -> None:
    op.create_table(
        "search_vectors",
        sa.Column("article_id", sa.BigInteger, nullable=False),
        sa.Column("section_id", sa.BigInteger, nullable=True),
        sa.Column("embedding_model", sa.Text, nullable=False),
        sa.Column("embedding_half", HALFVEC(), nullable=False),
    )
    # A vector of 384 halves (776 bytes) never needs TOAST; PLAIN keeps a wider model's in the row too.
    op.execute("ALTER TABLE search_vectors ALTER COLUMN embedding_half SET STORAGE PLAIN")
    op.execute(FUNCTIONS)
    op.execute(BACKFILL)
    op.drop_column("knowledge_sections", "embedding_half")  # and the approximate mode's index on it, if built
    # The card's index of `supportrag db hnsw` would be kept up to date and never read: rebuild both on the new table.
    op.execute("DROP INDEX IF EXISTS knowledge_base_half_hnsw")
    op.create_index("search_vectors_article", "search_vectors", ["article_id"])
    op.create_index("search_vectors_section", "search_vectors", ["section_id"], unique=True)
    for table, kind in KINDS.items():
        for event, (transition, suffix) in TRIGGERS.items():
            op.execute(f"""CREATE TRIGGER {table}_search_vectors_{event} AFTER {event.upper()} ON {table}
                           REFERENCING {transition} FOR EACH STATEMENT
                           EXECUTE FUNCTION search_vectors_{kind}_{suffix}()""")
        op.execute(f"""CREATE TRIGGER {table}_search_vectors_truncate AFTER TRUNCATE ON {table}
                       FOR EACH STATEMENT EXECUTE FUNCTION search_vectors_{kind}_truncated()""")


def downgrade() -> None:
    for table, kind in KINDS.items():
        for event in (*TRIGGERS, "truncate"):
            op.execute(f"DROP TRIGGER {table}_search_vectors_{event} ON {table}")
        for event in ("inserted", "deleted", "updated", "truncated"):
            op.execute(f"DROP FUNCTION search_vectors_{kind}_{event}()")
    op.drop_table("search_vectors")
    op.add_column("knowledge_sections", sa.Column(
        "embedding_half", HALFVEC(), sa.Computed("l2_normalize(embedding)::halfvec", persisted=True), nullable=True))
    op.execute("ALTER TABLE knowledge_sections ALTER COLUMN embedding_half SET STORAGE MAIN")
