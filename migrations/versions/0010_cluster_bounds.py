"""Cluster bounds: what the exact index walk reads instead of HNSW (service.retrieval.walk).

- ``vector_clusters``: per embedding model, k-means centroids and each one's *radius*, the largest angle between
  the centroid and any vector assigned to it. A trigger keeps that true on every insert or update of a vector
  (it widens the radius when a vector lands outside), so the bound never depends on the writer.
- ``cluster_id`` on articles (their own vector) and sections; NULL = not assigned (always read by the walk).
  Deleting a cluster (re-training) unassigns its rows.
- ``boost_bucket`` (importance in steps of 1/16) and ``boost_period`` (the week of created_at) on articles,
  generated, and copied to their sections by triggers: with them the walk knows the largest
  ``importance × recency`` of a group of rows without reading it.
- A btree on (cluster_id, boost_bucket, boost_period) of both tables: the walk reads the rows of a cluster whose
  boost can still matter with range scans.
- Drops the HNSW indexes of 0009 (the walk no longer uses them; they cost ~5 ms per inserted row) and the
  importance btree (its only reader was the HNSW walk).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import VECTOR

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("knowledge_base", "knowledge_sections")

FUNCTIONS = """
CREATE FUNCTION boost_bucket(importance double precision) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT LEAST(GREATEST(floor(importance * 16.0), 0), 31)::smallint $$;

-- The epoch of a timestamptz does not depend on the time zone, so this is immutable in fact.
CREATE FUNCTION boost_period(created_at timestamptz) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT floor(EXTRACT(EPOCH FROM created_at) / 604800.0)::integer $$;

CREATE FUNCTION knowledge_sections_boost() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT kb.boost_bucket, kb.boost_period INTO NEW.boost_bucket, NEW.boost_period
    FROM knowledge_base kb WHERE kb.id = NEW.article_id;
    RETURN NEW;
END $$;

CREATE FUNCTION knowledge_base_boost_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE knowledge_sections SET boost_bucket = NEW.boost_bucket, boost_period = NEW.boost_period
    WHERE article_id = NEW.id;
    RETURN NULL;
END $$;

-- Keeps "every vector of a cluster lies within its radius" true whoever writes: an assignment to a cluster of
-- another model, or of a row without a vector, is dropped; a vector outside the radius widens it
-- (+0.001 rad: acos near 0 amplifies float error).
CREATE FUNCTION vector_cluster_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cluster record;
    distance double precision;
    angle double precision;
BEGIN
    IF NEW.cluster_id IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT c.model, c.centroid INTO cluster FROM vector_clusters c WHERE c.id = NEW.cluster_id;
    IF NOT FOUND OR NEW.embedding IS NULL OR NEW.embedding_model IS DISTINCT FROM cluster.model THEN
        NEW.cluster_id := NULL;
        RETURN NEW;
    END IF;
    distance := NEW.embedding <=> cluster.centroid;
    IF distance = 'NaN'::double precision THEN
        NEW.cluster_id := NULL;
        RETURN NEW;
    END IF;
    angle := acos(LEAST(1.0, GREATEST(-1.0, 1.0 - distance))) + 0.001;
    UPDATE vector_clusters SET radius = angle WHERE id = NEW.cluster_id AND radius < angle;
    RETURN NEW;
END $$;
"""

TRIGGERS = """
CREATE TRIGGER knowledge_sections_boost BEFORE INSERT OR UPDATE OF article_id, boost_bucket, boost_period
    ON knowledge_sections FOR EACH ROW EXECUTE FUNCTION knowledge_sections_boost();
CREATE TRIGGER knowledge_base_boost_cascade AFTER UPDATE ON knowledge_base FOR EACH ROW
    WHEN (OLD.boost_bucket IS DISTINCT FROM NEW.boost_bucket OR OLD.boost_period IS DISTINCT FROM NEW.boost_period)
    EXECUTE FUNCTION knowledge_base_boost_cascade();
CREATE TRIGGER knowledge_base_cluster_guard BEFORE INSERT OR UPDATE OF embedding, embedding_model, cluster_id
    ON knowledge_base FOR EACH ROW EXECUTE FUNCTION vector_cluster_guard();
CREATE TRIGGER knowledge_sections_cluster_guard BEFORE INSERT OR UPDATE OF embedding, embedding_model, cluster_id
    ON knowledge_sections FOR EACH ROW EXECUTE FUNCTION vector_cluster_guard();
"""


def upgrade() -> None:
    op.drop_index("knowledge_sections_embedding_half_hnsw", table_name="knowledge_sections")
    op.drop_index("knowledge_base_embedding_half_hnsw", table_name="knowledge_base")
    op.drop_index("knowledge_base_importance", table_name="knowledge_base")
    create_cluster_walk()


def create_cluster_walk() -> None:
    """Everything the walk reads by (0013's downgrade re-creates it with this)."""
    op.create_table(
        "vector_clusters",
        sa.Column("id", sa.Integer, sa.Identity(always=False), primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("centroid", VECTOR(1536), nullable=False),
        sa.Column("radius", sa.Double, nullable=False),
        sa.Column("members", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("vector_clusters_model", "vector_clusters", ["model"])
    op.execute(FUNCTIONS)
    op.add_column("knowledge_base", sa.Column("boost_bucket", sa.SmallInteger,
                                              sa.Computed("boost_bucket(importance)", persisted=True)))
    op.add_column("knowledge_base", sa.Column("boost_period", sa.Integer,
                                              sa.Computed("boost_period(created_at)", persisted=True)))
    op.add_column("knowledge_sections", sa.Column("boost_bucket", sa.SmallInteger, nullable=True))
    op.add_column("knowledge_sections", sa.Column("boost_period", sa.Integer, nullable=True))
    op.execute("""UPDATE knowledge_sections s SET boost_bucket = kb.boost_bucket, boost_period = kb.boost_period
                  FROM knowledge_base kb WHERE kb.id = s.article_id""")
    op.alter_column("knowledge_sections", "boost_bucket", nullable=False)
    op.alter_column("knowledge_sections", "boost_period", nullable=False)
    for table in TABLES:
        op.add_column(table, sa.Column("cluster_id", sa.Integer,
                                       sa.ForeignKey("vector_clusters.id", ondelete="SET NULL"), nullable=True))
        op.create_index(f"{table}_cluster_boost", table, ["cluster_id", "boost_bucket", "boost_period"])
    op.execute(TRIGGERS)


def downgrade() -> None:
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
    op.create_index("knowledge_base_importance", "knowledge_base", ["importance"])
    half = "(subvector(embedding, 1, 384)::halfvec(384)) halfvec_cosine_ops"
    op.execute(f"CREATE INDEX knowledge_base_embedding_half_hnsw ON knowledge_base USING hnsw ({half})")
    op.execute(f"CREATE INDEX knowledge_sections_embedding_half_hnsw ON knowledge_sections USING hnsw ({half})")
