"""Serving at scale: server sizing, the query-embedding cache, searches on a read replica, bulk section COPY."""

from datetime import datetime, timedelta, timezone
from typing import Iterator

import numpy as np
import psycopg
import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.engine import create_engine
from service.db.migrate import upgrade_database
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import RetrievalSettings, rank_articles
from service.runtime import CachedEmbedder, Runtime
from service.web.serving import ServerSize, size_server

from .conftest import admin_conninfo
from .helpers import CountingEmbedder

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("cpus, workers, threads, expected", [
    (2, None, None, ServerSize(workers=2, threads=4, pool_size=4)),
    (8, None, None, ServerSize(workers=8, threads=4, pool_size=4)),
    (None, None, None, ServerSize(workers=1, threads=4, pool_size=4)),
    (8, 3, 10, ServerSize(workers=3, threads=10, pool_size=10)),  # explicit flags win; the pool follows threads
])
def test_server_defaults_are_a_worker_per_core_and_a_pool_per_worker_threads(cpus, workers, threads, expected):
    assert size_server(cpus=cpus, workers=workers, threads=threads) == expected


def test_repeated_queries_are_embedded_once_and_batches_are_never_cached(local_embedder):
    counting = CountingEmbedder(local_embedder)
    cached = CachedEmbedder(counting, size=2)

    first = cached.embed(["how do I reset my password"])
    again = cached.embed(["how do I reset my password"])
    cached.embed(["a", "b"])
    cached.embed(["refund"])
    cached.embed(["shipping"])  # evicts the least recently used: the password query
    cached.embed(["how do I reset my password"])

    np.testing.assert_array_equal(first, again)
    assert counting.calls == [["how do I reset my password"], ["a", "b"], ["refund"], ["shipping"],
                              ["how do I reset my password"]]
    assert (cached.hits, cached.model_name, cached.dimensions) == (1, counting.model_name, counting.dimensions)


def test_a_cached_vector_cannot_be_changed_by_its_caller(local_embedder):
    cached = CachedEmbedder(local_embedder, size=4)
    cached.embed(["refund"])[0][0] = 42.0
    assert cached.embed(["refund"])[0][0] != 42.0


@pytest.fixture
def two_databases(pg_url) -> Iterator[tuple[sa.Engine, sa.Engine]]:
    """A primary and a 'replica': two migrated databases on the test server (replication itself is Postgres's)."""
    names = ["t_primary_scale", "t_replica_scale"]
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    engines = [create_engine(sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False),
                             pool_size=1) for name in names]
    for engine in engines:
        upgrade_database(engine)
    yield engines[0], engines[1]
    for engine in engines:
        engine.dispose()
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def insert_article(engine: sa.Engine, title: str, vector: np.ndarray) -> int:
    with engine.begin() as conn:
        return conn.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, created_at)
            VALUES (:title, :title, :embedding, CAST(CAST(:embedding AS vector) AS halfvec), 'test-model',
                    :created_at) RETURNING id
        """), {"title": title, "embedding": vector, "created_at": NOW - timedelta(days=1)}).scalar_one()


def test_searches_run_on_the_read_replica_and_writes_on_the_primary(two_databases):
    primary, replica = two_databases
    vector = np.zeros(1536, dtype=np.float32)
    vector[0] = 1.0
    insert_article(replica, "only on the replica", vector)
    runtime = Runtime(Settings(), primary, read_engine=replica)

    with runtime.session() as session:
        for precision in ("half", "full"):
            found = rank_articles(session, vector, model="test-model", limit=3, weights=RankingWeights(),
                                  retrieval=RetrievalSettings(), now=NOW, precision=precision)
            assert [r.title for r in found] == ["only on the replica"]
        session.execute(sa.text("INSERT INTO app_state (key, value) VALUES ('written', 'here')"))

    with primary.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM app_state WHERE key = 'written'")).scalar_one() == "here"
        assert conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one() == 0


def test_a_new_embedded_data_directory_gets_memory_sized_to_the_machine_once(tmp_path):
    from service.db.embedded import TUNING_MARK, _size_to_machine  # noqa: PLC0415  (one private helper)

    conf = tmp_path / "postgresql.conf"
    conf.write_text("max_connections = 100\n", encoding="utf-8")
    _size_to_machine(tmp_path)
    _size_to_machine(tmp_path)  # a second start changes nothing

    text = conf.read_text(encoding="utf-8")
    assert text.startswith("max_connections = 100\n") and text.count(TUNING_MARK) == 1
    shared_mb = int(text.split("shared_buffers = '")[1].split("MB")[0])
    assert 128 <= shared_mb <= 8192
