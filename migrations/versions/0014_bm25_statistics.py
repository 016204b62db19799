"""BM25 statistics kept by triggers (service.retrieval.bm25 scores with them).

A BM25 *unit* is an article's card (``knowledge_base.search_vector``: title + content) or a text section
(``knowledge_sections.search_vector``: heading path + section text, generated here; heading-only sections are
not units, their words are in the text sections). Term frequencies are the tsvector's positions.
- ``bm25_length`` on both tables (generated): the unit's length in terms (the count of its positions).
- ``bm25_terms``: per lexeme, how many units contain it (df); a lexeme no unit has is deleted.
- ``bm25_totals`` (one row): N (units) and the summed length (avgdl = total_length / units).
Statement-level AFTER triggers with transition tables keep all three true whoever writes (a bulk COPY pays one
aggregate per statement, not one per row); updates that leave the tsvector unchanged cost a join and nothing else;
a TRUNCATE recounts. Writers of units queue on the totals row from their first write to their commit.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

CARD_VECTOR = (
    "setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A') || "
    "setweight(to_tsvector('english'::regconfig, coalesce(content, '')), 'B')"
)
SECTION_VECTOR = ("CASE WHEN kind = 'text' THEN to_tsvector('english'::regconfig, "
                  "bm25_heading_text(heading_path) || ' ' || content) END")

FUNCTIONS = """
CREATE FUNCTION bm25_term_count(vector tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer FROM unnest(vector) AS u $$;

-- array_to_string is only STABLE (it is polymorphic); over text it cannot change.
CREATE FUNCTION bm25_heading_text(path text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT coalesce(array_to_string(path, ' '), '') $$;

-- Applies a statement's change: each (vector, length, sign) is a unit gone (-1) or come (+1).
CREATE FUNCTION bm25_apply(vectors tsvector[], lengths integer[], signs integer[]) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    -- The totals row first: writers of units queue here, before any term lock (no lock-order deadlock
    -- between two transactions that each write an article and then its sections).
    PERFORM 1 FROM bm25_totals WHERE id = 1 FOR UPDATE;
    INSERT INTO bm25_terms AS t (term, df)
    SELECT u.lexeme, sum(d.sign) FROM unnest(vectors, signs) AS d (vector, sign), unnest(d.vector) AS u
    GROUP BY u.lexeme HAVING sum(d.sign) <> 0 ORDER BY u.lexeme
    ON CONFLICT (term) DO UPDATE SET df = t.df + EXCLUDED.df;
    DELETE FROM bm25_terms
    WHERE df <= 0 AND term IN (SELECT u.lexeme FROM unnest(vectors) AS d (vector), unnest(d.vector) AS u);
    UPDATE bm25_totals AS t SET units = t.units + s.change, total_length = t.total_length + s.length_change
    FROM (SELECT sum(d.sign) AS change, sum(d.sign * d.length::bigint) AS length_change
          FROM unnest(lengths, signs) AS d (length, sign)) AS s
    WHERE t.id = 1;
END $$;

-- The statistics from scratch: at migration, and after a TRUNCATE (which row changes do not describe).
CREATE FUNCTION bm25_recount() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM bm25_terms;
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

CREATE FUNCTION bm25_units_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bm25_recount();
    RETURN NULL;
END $$;

CREATE FUNCTION bm25_units_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bm25_apply(array_agg(n.search_vector), array_agg(n.bm25_length), array_agg(1))
    FROM new_rows n WHERE n.search_vector IS NOT NULL HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION bm25_units_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bm25_apply(array_agg(o.search_vector), array_agg(o.bm25_length), array_agg(-1))
    FROM old_rows o WHERE o.search_vector IS NOT NULL HAVING count(*) > 0;
    RETURN NULL;
END $$;

-- An update that leaves a row's vector as it was (a new embedding, importance) changes nothing.
CREATE FUNCTION bm25_units_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bm25_apply(array_agg(d.vector), array_agg(d.length), array_agg(d.sign))
    FROM (SELECT o.search_vector AS vector, o.bm25_length AS length, -1 AS sign
          FROM old_rows o JOIN new_rows n ON n.id = o.id
          WHERE o.search_vector IS NOT NULL AND o.search_vector IS DISTINCT FROM n.search_vector
          UNION ALL
          SELECT n.search_vector, n.bm25_length, 1
          FROM new_rows n JOIN old_rows o ON o.id = n.id
          WHERE n.search_vector IS NOT NULL AND o.search_vector IS DISTINCT FROM n.search_vector) AS d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;
"""

TABLES = ("knowledge_base", "knowledge_sections")
TRIGGER_EVENTS = {"insert": ("NEW TABLE AS new_rows", "bm25_units_inserted"),
                  "delete": ("OLD TABLE AS old_rows", "bm25_units_deleted"),
                  "update": ("OLD TABLE AS old_rows NEW TABLE AS new_rows", "bm25_units_updated")}


def upgrade() -> None:
    op.execute(FUNCTIONS)
    op.create_table(
        "bm25_terms",
        sa.Column("term", sa.Text, primary_key=True),
        sa.Column("df", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "bm25_totals",
        sa.Column("id", sa.SmallInteger, primary_key=True),
        sa.Column("units", sa.BigInteger, nullable=False),
        sa.Column("total_length", sa.BigInteger, nullable=False),
        sa.CheckConstraint("id = 1", name="bm25_totals_one_row"),
    )
    op.add_column("knowledge_base", sa.Column(
        "bm25_length", sa.Integer, sa.Computed(f"bm25_term_count({CARD_VECTOR})", persisted=True), nullable=True))
    op.add_column("knowledge_sections", sa.Column(
        "search_vector", postgresql.TSVECTOR, sa.Computed(SECTION_VECTOR, persisted=True), nullable=True))
    op.add_column("knowledge_sections", sa.Column(
        "bm25_length", sa.Integer, sa.Computed(f"bm25_term_count({SECTION_VECTOR})", persisted=True),
        nullable=True))
    op.execute("SELECT bm25_recount()")
    for table in TABLES:
        for event, (transition, function) in TRIGGER_EVENTS.items():
            op.execute(f"""CREATE TRIGGER {table}_bm25_{event} AFTER {event.upper()} ON {table}
                           REFERENCING {transition} FOR EACH STATEMENT
                           EXECUTE FUNCTION {function}()""")
        op.execute(f"""CREATE TRIGGER {table}_bm25_truncate AFTER TRUNCATE ON {table}
                       FOR EACH STATEMENT EXECUTE FUNCTION bm25_units_truncated()""")


def downgrade() -> None:
    for table in TABLES:
        for event in (*TRIGGER_EVENTS, "truncate"):
            op.execute(f"DROP TRIGGER {table}_bm25_{event} ON {table}")
    op.drop_column("knowledge_sections", "bm25_length")
    op.drop_column("knowledge_sections", "search_vector")
    op.drop_column("knowledge_base", "bm25_length")
    op.drop_table("bm25_totals")
    op.drop_table("bm25_terms")
    for function in ("bm25_units_updated()", "bm25_units_deleted()", "bm25_units_inserted()",
                     "bm25_units_truncated()", "bm25_recount()",
                     "bm25_apply(tsvector[], integer[], integer[])", "bm25_heading_text(text[])", "bm25_term_count(tsvector)"):
        op.execute(f"DROP FUNCTION {function}")
