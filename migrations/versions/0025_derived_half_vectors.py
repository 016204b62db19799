"""Retrieval that keeps its contract (issue 27): derived half copies, and the BM25 vectors' own text configuration.

**Derived half copies (item 4).** The card's half-precision copy follows ``knowledge_base.embedding`` whoever
writes it.

``embedding_half`` (0015) was written by the indexing use case beside ``embedding``, and a CHECK refused any row
where one was NULL without the other: ``UPDATE knowledge_base SET embedding = NULL WHERE …`` (how a DBA forces a
re-embed) failed, and a direct INSERT had to compute the half copy itself. A BEFORE trigger now derives it from
``embedding`` on every INSERT and every UPDATE that sets ``embedding``, ``embedding_half`` or ``embedding_model``:
NULL with a NULL embedding, else the first *width* dimensions of the padded vector, unit length, in half precision
(what the indexing use case writes, to the bit). 0016's statement triggers then copy it into ``search_vectors``, as
the section tables' copies already were (sections store their own width, so theirs needs no trigger).

The width is the model's, and the padded column does not carry it: the half copy the writer gave (or kept, for
the same model), else another card of the same model's (through ``knowledge_base_embedding_model``), else the
last non-zero coordinate of the padded vector (a first vector of a new model written by hand).

**BM25 vectors (item 2).** The cards' and text sections' tsvectors were ``to_tsvector('english', …)``: Snowball's
stop list drops 179 words, among them the question words a help center's titles are made of ("what", "how", "can",
"should", "when"), so "What is COVID-19?" could not match "what is covid 19" on "what". They are now
``bm25_text_vector(…)``: the same Snowball English stemmer with no stop list (configuration
``supportrag_english``), less the 33 words of Lucene's English stop set (the stop words of plain BM25 as
Lucene and bm25s run it). BM25's idf keeps the remaining common words cheap, and the pruned leg never scores
them alone (service.retrieval.bm25_prune). The generated columns are rebuilt and the statistics recounted.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE FUNCTION knowledge_base_derive_half() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    width integer;
BEGIN
    IF NEW.embedding IS NULL THEN
        NEW.embedding_half := NULL;
        RETURN NEW;
    END IF;
    IF NEW.embedding_half IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.embedding_half IS DISTINCT FROM OLD.embedding_half
                                           OR NEW.embedding_model IS NOT DISTINCT FROM OLD.embedding_model) THEN
        width := vector_dims(NEW.embedding_half);
    ELSE
        SELECT vector_dims(kb.embedding_half) INTO width FROM knowledge_base kb
        WHERE kb.embedding_model = NEW.embedding_model AND kb.embedding_half IS NOT NULL AND kb.id <> NEW.id
        LIMIT 1;
    END IF;
    IF width IS NULL THEN
        SELECT max(u.i) INTO width FROM unnest(NEW.embedding::real[]) WITH ORDINALITY AS u (v, i) WHERE u.v <> 0;
    END IF;
    NEW.embedding_half := l2_normalize(subvector(NEW.embedding, 1, coalesce(width, 1)))::halfvec;
    RETURN NEW;
END $$;
"""


# Lucene's English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET; bm25s's "en" list is the same 33 words).
LUCENE_STOP_WORDS = ("a an and are as at be but by for if in into is it no not of on or such that the their then "
                     "there these they this to was will with")
CONFIGURATION = """
CREATE TEXT SEARCH DICTIONARY supportrag_english_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION supportrag_english (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION supportrag_english ALTER MAPPING REPLACE english_stem WITH supportrag_english_stem;
"""
STOP_LEXEMES = sa.text("SELECT array_agg(DISTINCT u.lexeme ORDER BY u.lexeme) "
                       "FROM unnest(to_tsvector('supportrag_english', :words)) AS u")
CARD = {"old": "setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A') || "
               "setweight(to_tsvector('english'::regconfig, coalesce(content, '')), 'B')",
        "new": "setweight(bm25_text_vector(coalesce(title, '')), 'A') || "
               "setweight(bm25_text_vector(coalesce(content, '')), 'B')"}
SECTION = {"old": "CASE WHEN kind = 'text' THEN to_tsvector('english'::regconfig, "
                  "bm25_heading_text(heading_path) || ' ' || content) END",
           "new": "CASE WHEN kind = 'text' THEN bm25_text_vector(bm25_heading_text(heading_path) || ' ' || "
                  "content) END"}


def _text_vector_function() -> str:
    """``bm25_text_vector(text)``: the configuration's lexemes less Lucene's stop words (computed once, here)."""
    stop = op.get_bind().execute(STOP_LEXEMES, {"words": LUCENE_STOP_WORDS}).scalar_one()
    literal = "ARRAY[" + ", ".join("'" + lexeme.replace("'", "''") + "'" for lexeme in stop) + "]::text[]"
    return f"""CREATE FUNCTION bm25_text_vector(body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ts_delete(to_tsvector('supportrag_english'::regconfig, body), {literal}) $$"""


def _rebuild_vectors(version: str) -> None:
    """Drop and re-add the generated BM25 columns with ``version``'s expressions, then recount the statistics
    (a table rewrite fires no trigger)."""
    op.drop_index("knowledge_base_search_vector", table_name="knowledge_base")
    for table in ("knowledge_base", "knowledge_sections"):
        op.drop_column(table, "bm25_length")
        op.drop_column(table, "search_vector")
    for table, vector in (("knowledge_base", CARD[version]), ("knowledge_sections", SECTION[version])):
        op.add_column(table, sa.Column("search_vector", postgresql.TSVECTOR, sa.Computed(vector, persisted=True),
                                       nullable=True))
        op.add_column(table, sa.Column("bm25_length", sa.Integer,
                                       sa.Computed(f"bm25_term_count({vector})", persisted=True), nullable=True))
    op.create_index("knowledge_base_search_vector", "knowledge_base", ["search_vector"], postgresql_using="gin")
    op.execute("SELECT bm25_recount()")


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute("""CREATE TRIGGER knowledge_base_derive_half
                  BEFORE INSERT OR UPDATE OF embedding, embedding_half, embedding_model ON knowledge_base
                  FOR EACH ROW EXECUTE FUNCTION knowledge_base_derive_half()""")
    op.execute(CONFIGURATION)
    op.execute(_text_vector_function())
    _rebuild_vectors("new")


def downgrade() -> None:
    _rebuild_vectors("old")
    op.execute("DROP FUNCTION bm25_text_vector(text)")
    op.execute("DROP TEXT SEARCH CONFIGURATION supportrag_english")
    op.execute("DROP TEXT SEARCH DICTIONARY supportrag_english_stem")
    op.execute("DROP TRIGGER knowledge_base_derive_half ON knowledge_base")
    op.execute("DROP FUNCTION knowledge_base_derive_half()")
