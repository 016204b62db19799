"""Migrations: up from empty, down to base, up again; the models match the migrated schema."""

from datetime import datetime, timezone

import numpy as np
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.orm import Session

from service.db.engine import create_engine
from service.db.migrate import alembic_config, current_revision, downgrade_database, upgrade_database
from service.db.models import Base
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles

from .helpers import run_cli, run_cli_json

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def _tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _schema_differences(engine) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(context, Base.metadata)


def test_upgrade_downgrade_upgrade_round_trip_on_an_empty_database(fresh_database_url, monkeypatch):
    from alembic import command

    from service.db.migrate import stored_revisions

    runs = []  # each Alembic upgrade the service starts (a database at the head needs none)
    real_upgrade = command.upgrade
    monkeypatch.setattr(command, "upgrade", lambda *args, **kwargs: (runs.append(args[1]),
                                                                     real_upgrade(*args, **kwargs)))
    engine = create_engine(fresh_database_url)
    try:
        assert current_revision(engine) is None
        upgrade_database(engine)
        assert current_revision(engine) == HEAD
        assert {"knowledge_base", "app_state"} <= _tables(engine)
        upgrade_database(engine)  # at the head: one query, no Alembic
        assert runs == ["head"]

        downgrade_database(engine, "-1")  # one behind: migrated again
        with engine.connect() as connection:
            assert stored_revisions(connection) not in ([], [HEAD])
        upgrade_database(engine)
        assert runs == ["head", "head"] and current_revision(engine) == HEAD

        downgrade_database(engine, "base")
        assert current_revision(engine) is None
        assert not {"knowledge_base", "app_state"} & _tables(engine)

        upgrade_database(engine)
        assert current_revision(engine) == HEAD
        assert _schema_differences(engine) == []
    finally:
        engine.dispose()


def test_the_head_revision_the_quick_check_compares_with_is_alembics_head():
    from service.db.migrate import HEAD_REVISION

    assert HEAD_REVISION == HEAD


def test_model_metadata_matches_the_migrated_schema(engine):
    assert _schema_differences(engine) == []


def test_the_scanned_half_vectors_stay_in_the_row_and_the_full_ones_may_go_out_of_line(session):
    storage = dict(session.execute(sa.text("""
        SELECT attrelid::regclass::text || '.' || attname, attstorage FROM pg_attribute
        WHERE attrelid IN ('knowledge_base'::regclass, 'knowledge_sections'::regclass, 'search_vectors'::regclass)
          AND attname IN ('embedding', 'embedding_half')
    """)).all())
    assert storage == {"knowledge_base.embedding": "e", "knowledge_sections.embedding": "e",
                       "knowledge_base.embedding_half": "m", "search_vectors.embedding_half": "p"}


def test_no_vector_index_is_kept_that_exact_search_does_not_read_and_the_walk_is_gone(session):
    definitions = dict(session.execute(sa.text(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE tablename IN ('knowledge_base', 'knowledge_sections', 'search_vectors')")).all())
    assert not [name for name, definition in definitions.items() if "USING hnsw" in definition
                or "USING ivfflat" in definition or "cluster" in name]
    assert session.execute(sa.text("SELECT to_regclass('vector_clusters')")).scalar_one() is None


def test_sections_store_the_model_width_and_the_scan_a_half_precision_copy(session):
    types = dict(session.execute(sa.text("""
        SELECT attrelid::regclass::text || '.' || attname, format_type(atttypid, atttypmod) FROM pg_attribute
        WHERE attrelid IN ('knowledge_base'::regclass, 'knowledge_sections'::regclass, 'search_vectors'::regclass)
          AND attname IN ('embedding', 'embedding_half') AND NOT attisdropped
    """)).all())
    assert types == {"knowledge_base.embedding": "vector(1536)", "knowledge_base.embedding_half": "halfvec",
                     "knowledge_sections.embedding": "vector", "search_vectors.embedding_half": "halfvec"}


def test_embedding_column_is_vector_1536(session):
    column_type = session.execute(sa.text("""
        SELECT format_type(atttypid, atttypmod) FROM pg_attribute
        WHERE attrelid = 'knowledge_base'::regclass AND attname = 'embedding'
    """)).scalar_one()
    assert column_type == "vector(1536)"


def test_database_rejects_out_of_range_importance_even_past_the_application(session):
    with pytest.raises(sa.exc.IntegrityError):
        with session.begin_nested():
            session.execute(sa.text(
                "INSERT INTO knowledge_base (title, content, importance) VALUES ('t', 'c', 2.5)"))


def test_a_database_from_before_sections_is_backfilled_by_db_upgrade_then_reembed(empty_cli_env, empty_db_engine, monkeypatch):
    monkeypatch.setenv("SUPPORTRAG_AUTO_SEED", "0")
    run_cli("db", "upgrade", "0005")
    with empty_db_engine.begin() as conn:  # an article as stored before sections: one vector of title + content
        conn.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_model, content_sha256)
            VALUES ('Gift cards', :content, :vector, 'local:all-MiniLM-L6-v2', 'old-hash')
        """), {"content": "Check your gift card balance any time under Account, Gift cards, on the website."
                          "\n\n## Expired gift card?\n\nWe extend gift cards that "
                          "expired in the last year: contact support with the card number.",
               "vector": "[" + ",".join(["0.01"] * 1536) + "]"})
    run_cli("db", "upgrade")
    assert run_cli_json("stats")["sections"]["total"] == 0
    assert "re-embedded 1 articles" in run_cli("reembed").stdout
    stats = run_cli_json("stats")
    assert stats["sections"]["pending"] == 0 and stats["sections"]["total"] == 3  # lead, section, heading
    assert (stats["embedded"], stats["pending"]) == (1, 0)
    [result] = run_cli_json("search", "my gift card expired", "--limit", "1")
    assert result["section"] == "Gift cards › Expired gift card?"


def test_upgrading_past_0015_narrows_padded_vectors_to_the_models_width(empty_cli_env, empty_db_engine):
    run_cli("db", "upgrade", "0010")
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((3, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    padded = np.pad(vectors, ((0, 0), (0, 1536 - 384)))  # as every version before 0015 stored them
    with empty_db_engine.begin() as conn:
        article_id = conn.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_model, content_sha256)
            VALUES ('Gift cards', 'Balance.', :card, 'm', 'h') RETURNING id
        """), {"card": padded[0]}).scalar_one()
        for ordinal in (1, 2):
            conn.execute(sa.text("""
                INSERT INTO knowledge_sections (article_id, ordinal, content, char_start, char_end, content_sha256,
                                                embedding, embedding_model, boost_bucket, boost_period)
                VALUES (:id, :ordinal, 'x', 0, 1, 'h', :vector, 'm', 0, 0)
            """), {"id": article_id, "ordinal": ordinal, "vector": padded[ordinal]})
    run_cli("db", "upgrade")
    with empty_db_engine.connect() as conn:
        widths = conn.execute(sa.text("""
            SELECT (SELECT array_agg(DISTINCT vector_dims(embedding)) FROM knowledge_sections),
                   (SELECT array_agg(DISTINCT vector_dims(embedding_half)) FROM search_vectors),
                   (SELECT array_agg(DISTINCT vector_dims(embedding_half)) FROM knowledge_base),
                   (SELECT array_agg(DISTINCT vector_dims(embedding)) FROM knowledge_base)
        """)).one()
        assert [list(w) for w in widths] == [[384], [384], [384], [1536]]
        with Session(bind=conn) as session:
            [found] = rank_articles(session, vectors[2], model="m", limit=1, weights=RankingWeights(),
                                    retrieval=RetrievalSettings(), now=datetime.now(timezone.utc))
    assert found.similarity == pytest.approx(1.0, abs=1e-6) and found.section_similarity == found.similarity
