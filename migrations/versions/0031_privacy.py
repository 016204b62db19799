"""Article versions, the version a citation quoted, and the privacy log (issue 36).

Every insert into ``knowledge_base``, and every update that changes its title, content, category or importance,
writes a row to ``article_versions`` from a trigger, so no writer (page, API, CLI, import, candidate, proposal, or
a direct SQL statement) can skip it. The author and source come from the transaction-local settings
``supportrag.author`` and ``supportrag.source`` (service.knowledge.versions.set_change_context). ``version`` on
the article is the number of its newest version: the optimistic lock the editors send back.

``ticket_citations.article_version`` is filled in on insert with the cited article's version, so an agent can read
the text the customer got. ``privacy_events`` records each erasure or retention run (counts, never an address).

A deleted article goes to ``article_trash`` (a trigger copies it, whoever deletes it) with its history: versions
have no foreign key, so they outlive the row until the trash is purged. ``article_drafts`` holds drafts, new
articles or edits of existing ones, outside ``knowledge_base``, so no search, gate or help page can see them.

Revision ID: 0031
Revises: 0026
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0031"
down_revision = "0029"
branch_labels = None
depends_on = None

FUNCTIONS = """
CREATE FUNCTION knowledge_base_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.title, NEW.content, NEW.category, NEW.importance)
       IS DISTINCT FROM (OLD.title, OLD.content, OLD.category, OLD.importance) THEN
        NEW.version := OLD.version + 1;
    ELSE
        NEW.version := OLD.version;
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION knowledge_base_record_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.version = OLD.version THEN
        RETURN NULL;
    END IF;
    INSERT INTO article_versions (article_id, number, title, content, category, importance, author, source)
    VALUES (NEW.id, NEW.version, NEW.title, NEW.content, NEW.category, NEW.importance,
            coalesce(nullif(current_setting('supportrag.author', true), ''), 'system'),
            coalesce(nullif(current_setting('supportrag.source', true), ''), 'sql'));
    RETURN NULL;
END $$;

CREATE FUNCTION ticket_citations_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.article_version IS NULL AND NEW.article_id IS NOT NULL THEN
        NEW.article_version := (SELECT version FROM knowledge_base WHERE id = NEW.article_id);
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION knowledge_base_to_trash() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO article_trash (id, title, content, category, importance, created_at, version, source_path,
                               source_sha256, deleted_by)
    VALUES (OLD.id, OLD.title, OLD.content, OLD.category, OLD.importance, OLD.created_at, OLD.version,
            OLD.source_path, OLD.source_sha256,
            coalesce(nullif(current_setting('supportrag.author', true), ''), 'system'))
    ON CONFLICT (id) DO NOTHING;
    RETURN OLD;
END $$;

CREATE TRIGGER knowledge_base_to_trash BEFORE DELETE ON knowledge_base
    FOR EACH ROW EXECUTE FUNCTION knowledge_base_to_trash();
CREATE TRIGGER knowledge_base_next_version BEFORE UPDATE ON knowledge_base
    FOR EACH ROW EXECUTE FUNCTION knowledge_base_next_version();
CREATE TRIGGER knowledge_base_record_version AFTER INSERT OR UPDATE ON knowledge_base
    FOR EACH ROW EXECUTE FUNCTION knowledge_base_record_version();
CREATE TRIGGER ticket_citations_version BEFORE INSERT ON ticket_citations
    FOR EACH ROW EXECUTE FUNCTION ticket_citations_version();
"""


def upgrade() -> None:
    op.add_column("knowledge_base", sa.Column("version", sa.Integer, nullable=False, server_default="1"))
    op.create_table(
        "article_versions",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("article_id", sa.BigInteger, nullable=False),  # no foreign key: history outlives a delete
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("category", sa.Text, nullable=True),
        sa.Column("importance", sa.Double, nullable=False),
        sa.Column("author", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("clock_timestamp()")),
        sa.UniqueConstraint("article_id", "number", name="article_versions_article_number"),
    )
    op.execute("""
        INSERT INTO article_versions (article_id, number, title, content, category, importance, author, source,
                                      created_at)
        SELECT id, 1, title, content, category, importance, 'system', 'migration', updated_at FROM knowledge_base
    """)
    op.add_column("ticket_citations", sa.Column("article_version", sa.Integer, nullable=True))
    op.add_column("tickets", sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "article_trash",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("category", sa.Text, nullable=True),
        sa.Column("importance", sa.Double, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("source_path", sa.Text, nullable=True),
        sa.Column("source_sha256", sa.Text, nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("clock_timestamp()")),
        sa.Column("deleted_by", sa.Text, nullable=False),
        sa.Index("article_trash_deleted", "deleted_at"),
    )
    op.create_table(
        "article_drafts",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("article_id", sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="CASCADE"),
                  nullable=True),
        sa.Column("base_version", sa.Integer, nullable=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("category", sa.Text, nullable=True),
        sa.Column("importance", sa.Double, nullable=False, server_default="1.0"),
        sa.Column("author", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Index("article_drafts_article", "article_id"),
    )
    op.create_table(
        "privacy_events",
        sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("actor", sa.Text, nullable=True),
        sa.Column("counts", JSONB, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint("kind IN ('erase', 'retention_raw_mail', 'retention_tickets', 'trash_purge')",
                           name="privacy_events_kind_valid"),
        sa.Index("privacy_events_created", "created_at"),
    )
    op.execute(FUNCTIONS)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS knowledge_base_to_trash ON knowledge_base")
    op.execute("DROP FUNCTION IF EXISTS knowledge_base_to_trash()")
    op.execute("DROP TRIGGER IF EXISTS ticket_citations_version ON ticket_citations")
    op.execute("DROP TRIGGER IF EXISTS knowledge_base_record_version ON knowledge_base")
    op.execute("DROP TRIGGER IF EXISTS knowledge_base_next_version ON knowledge_base")
    op.execute("DROP FUNCTION IF EXISTS ticket_citations_version()")
    op.execute("DROP FUNCTION IF EXISTS knowledge_base_record_version()")
    op.execute("DROP FUNCTION IF EXISTS knowledge_base_next_version()")
    op.drop_table("privacy_events")
    op.drop_table("article_drafts")
    op.drop_table("article_trash")
    op.drop_column("ticket_citations", "article_version")
    op.drop_column("tickets", "erased_at")
    op.drop_table("article_versions")
    op.drop_column("knowledge_base", "version")
