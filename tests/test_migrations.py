"""Migrations: up from empty, down to base, up again; the models match the migrated schema."""

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from service.db.engine import create_engine
from service.db.migrate import alembic_config, current_revision, downgrade_database, upgrade_database
from service.db.models import Base

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def _tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _schema_differences(engine) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(context, Base.metadata)


def test_upgrade_downgrade_upgrade_round_trip_on_an_empty_database(fresh_database_url):
    engine = create_engine(fresh_database_url)
    try:
        assert current_revision(engine) is None
        upgrade_database(engine)
        assert current_revision(engine) == HEAD
        assert {"knowledge_base", "app_state"} <= _tables(engine)

        downgrade_database(engine, "base")
        assert current_revision(engine) is None
        assert not {"knowledge_base", "app_state"} & _tables(engine)

        upgrade_database(engine)
        assert current_revision(engine) == HEAD
        assert _schema_differences(engine) == []
    finally:
        engine.dispose()


def test_model_metadata_matches_the_migrated_schema(engine):
    assert _schema_differences(engine) == []


def test_embedding_column_is_stored_plain_so_vectors_are_not_toasted(session):
    storage = session.execute(sa.text("""
        SELECT attstorage FROM pg_attribute
        WHERE attrelid = 'knowledge_base'::regclass AND attname = 'embedding'
    """)).scalar_one()
    assert storage == "p"


def test_hnsw_index_uses_the_cosine_operator_class(session):
    definition = session.execute(sa.text(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'knowledge_base_embedding_hnsw'"
    )).scalar_one()
    assert "USING hnsw (embedding vector_cosine_ops)" in definition


def test_embedding_column_is_vector_1536(session):
    column_type = session.execute(sa.text("""
        SELECT format_type(atttypid, atttypmod) FROM pg_attribute
        WHERE attrelid = 'knowledge_base'::regclass AND attname = 'embedding'
    """)).scalar_one()
    assert column_type == "vector(1536)"


def test_database_rejects_out_of_range_importance_even_past_the_application(session):
    import pytest

    with pytest.raises(sa.exc.IntegrityError):
        with session.begin_nested():
            session.execute(sa.text(
                "INSERT INTO knowledge_base (title, content, importance) VALUES ('t', 'c', 2.5)"))
