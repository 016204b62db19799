"""Narrow vectors for every scan, and no cluster walk.

- ``knowledge_sections.embedding`` is stored at the model's own width (``vector`` without a fixed dimension:
  384 for MiniLM) instead of zero-padded to 1536: three quarters of every scanned section was zeros, and
  pgvector multiplies them too.
- ``embedding_half`` (``halfvec``, the model's width, unit length): what every exact statement scans, re-scoring
  in full precision the candidates within the half-precision error bound (service.retrieval.precision).
  Generated from the full-precision vector for sections; written beside the card's padded 1536-d vector for
  articles (``knowledge_base.embedding`` stays as it is).
- Drops the cluster walk of 0010 (``vector_clusters``, ``cluster_id``, the boost buckets, their triggers,
  functions and btrees): on real text embeddings a cluster's radius is 76–85°, the walk pruned nothing and made
  every search slower than the scan (README, Performance).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import HALFVEC

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TABLES = ("knowledge_base", "knowledge_sections")
HALF_OF_SECTION = "l2_normalize(embedding)::halfvec"

# The width of each model's vectors: the last non-zero coordinate of any of its padded vectors.
MODEL_WIDTHS = """
CREATE TEMP TABLE model_width ON COMMIT DROP AS
SELECT embedding_model AS model, max(last)::int AS width FROM (
    SELECT t.embedding_model,
           (SELECT max(u.i) FROM unnest(t.embedding::real[]) WITH ORDINALITY AS u(v, i) WHERE u.v <> 0) AS last
    FROM (SELECT embedding_model, embedding FROM knowledge_sections WHERE embedding IS NOT NULL
          UNION ALL
          SELECT embedding_model, embedding FROM knowledge_base WHERE embedding IS NOT NULL) t
) widths
WHERE embedding_model IS NOT NULL
GROUP BY embedding_model
"""


def _drop_cluster_walk() -> None:
    for name, table in (("knowledge_sections_cluster_guard", "knowledge_sections"),
                        ("knowledge_base_cluster_guard", "knowledge_base"),
                        ("knowledge_base_boost_cascade", "knowledge_base"),
                        ("knowledge_sections_boost", "knowledge_sections")):
        op.execute(f"DROP TRIGGER {name} ON {table}")
    for table in TABLES:
        op.drop_index(f"{table}_cluster_boost", table_name=table)
        op.drop_column(table, "cluster_id")
        op.drop_column(table, "boost_period")
        op.drop_column(table, "boost_bucket")
    for function in ("vector_cluster_guard()", "knowledge_base_boost_cascade()", "knowledge_sections_boost()",
                     "boost_period(timestamptz)", "boost_bucket(double precision)"):
        op.execute(f"DROP FUNCTION {function}")
    op.drop_table("vector_clusters")


def upgrade() -> None:
    _drop_cluster_walk()
    op.execute(MODEL_WIDTHS)
    op.execute("ALTER TABLE knowledge_sections ALTER COLUMN embedding TYPE vector")
    op.execute("""UPDATE knowledge_sections s SET embedding = subvector(s.embedding, 1, w.width)
                  FROM model_width w WHERE w.model = s.embedding_model AND s.embedding IS NOT NULL""")
    # A section whose model is unknown has no width: it is re-embedded, as any pending section is.
    op.execute("UPDATE knowledge_sections SET embedding = NULL, embedding_model = NULL "
               "WHERE embedding IS NOT NULL AND embedding_model IS NULL")
    op.add_column("knowledge_sections", sa.Column(
        "embedding_half", HALFVEC(), sa.Computed(HALF_OF_SECTION, persisted=True), nullable=True))
    op.add_column("knowledge_base", sa.Column("embedding_half", HALFVEC(), nullable=True))
    # Nothing scans the padded card any more (a search reads ``embedding_half``, and the padded vector only for a
    # few candidates): out of line, it no longer makes every article row 6 KB wide (set before the UPDATE below,
    # which rewrites every embedded row).
    op.execute("ALTER TABLE knowledge_base ALTER COLUMN embedding SET STORAGE EXTERNAL")
    op.execute("UPDATE knowledge_base SET embedding = NULL, content_sha256 = NULL "
               "WHERE embedding IS NOT NULL AND embedding_model IS NULL")
    op.execute("""UPDATE knowledge_base kb
                  SET embedding_half = l2_normalize(subvector(kb.embedding, 1, w.width))::halfvec
                  FROM model_width w WHERE w.model = kb.embedding_model AND kb.embedding IS NOT NULL""")
    # Every writer stores both (a card search scans in half precision and re-scores in full).
    op.create_check_constraint("knowledge_base_embedding_half", "knowledge_base",
                               "(embedding IS NULL) = (embedding_half IS NULL)")
    # The scanned column stays in the heap row unless the row would not fit a page (MAIN); a section's
    # full-precision vector, read only to re-score a few candidates, may go out of line (EXTERNAL, the default).
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding_half SET STORAGE MAIN")
    op.execute("ALTER TABLE knowledge_sections ALTER COLUMN embedding SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_constraint("knowledge_base_embedding_half", "knowledge_base")
    op.drop_column("knowledge_base", "embedding_half")
    op.drop_column("knowledge_sections", "embedding_half")
    op.execute("""ALTER TABLE knowledge_sections ALTER COLUMN embedding TYPE vector(1536) USING
                  (embedding::real[] || array_fill(0::real, ARRAY[1536 - vector_dims(embedding)]))::vector(1536)""")
    op.execute("ALTER TABLE knowledge_sections ALTER COLUMN embedding SET STORAGE PLAIN")
    op.execute("ALTER TABLE knowledge_base ALTER COLUMN embedding SET STORAGE PLAIN")
    # The cluster walk comes back empty (no clusters: every row unassigned, read by every walk).
    walk = _load_revision("0010_cluster_bounds.py")
    walk.create_cluster_walk()


def _load_revision(filename: str):
    """Another revision's module (file names start with a digit: not importable by name)."""
    path = Path(__file__).with_name(filename)
    spec = importlib.util.spec_from_file_location(f"_revision_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
