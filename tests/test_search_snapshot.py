"""Issue 33: a search's statements read one snapshot (one REPEATABLE READ READ ONLY transaction), so a writer
committing between them changes nothing the search returns."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.engine import READ_REPLICA, create_engine
from service.db.snapshot import read_snapshot
from service.knowledge.articles import add_article
from service.retrieval.search import run_search
from service.runtime import Runtime

from .conftest import new_database

QUERY = "parrot food delivery to Mars"
LATE = {"title": "Parrot food delivery to Mars", "content": "We deliver parrot food to Mars every second Tuesday."}


@pytest.fixture
def committed(migrated_database_url, local_embedder, tmp_path):
    """A seeded runtime on its own database whose sessions really commit (no outer transaction)."""
    settings = Settings(database_url=migrated_database_url, data_dir=tmp_path, auto_seed=False)
    runtime = Runtime.start(settings, seed=False)
    runtime._embedder = local_embedder
    runtime.seed()
    yield runtime
    runtime.close()


def _search(runtime: Runtime, mode: str):
    retrieval = replace(runtime.retrieval, mode=mode)
    with runtime.session() as session:
        return run_search(session, runtime.embedder, QUERY, limit=5, weights=runtime.weights, retrieval=retrieval)


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_an_article_committed_between_a_searchs_statements_is_not_half_seen(committed, mode):
    """The writer commits after the search's first statement: the later statements (the all-words count, the
    ranking) must not see it. On READ COMMITTED each statement took a new snapshot and the ranking found it."""
    fired = []

    def write_midway(conn, cursor, statement, parameters, context, executemany):
        if fired or "set_config('statement_timeout'" not in statement:
            return
        fired.append(statement)
        with committed.session() as writer:  # its own connection, committed before the search goes on
            add_article(writer, committed.embedder, dict(LATE))

    sa.event.listen(committed.engine, "before_cursor_execute", write_midway)
    try:
        during = _search(committed, mode)
    finally:
        sa.event.remove(committed.engine, "before_cursor_execute", write_midway)
    assert fired, "the search ran no timed statement: the writer never got in"
    assert LATE["title"] not in [r.title for r in during.results]
    assert during.all_words_matches == 0
    after = _search(committed, mode)  # the article is findable: the search above only ran before it existed
    assert after.results[0].title == LATE["title"] and after.all_words_matches == 1


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_a_search_runs_in_one_repeatable_read_read_only_transaction(committed, mode):
    seen = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if "similarity" not in statement.lower():
            return  # only the ranking statement (each mode's has a similarity)
        with cursor.connection.cursor() as probe:
            probe.execute("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')")
            seen.append(tuple(probe.fetchone()))

    sa.event.listen(committed.engine, "after_cursor_execute", record)
    try:
        outcome = _search(committed, mode)
    finally:
        sa.event.remove(committed.engine, "after_cursor_execute", record)
    assert outcome.results and seen
    assert set(seen) == {("repeatable read", "on")}


def test_a_session_already_in_a_transaction_keeps_its_own(committed):
    with committed.session() as session:
        session.execute(sa.text("SELECT 1"))
        with read_snapshot(session) as fresh:
            level = session.execute(sa.text("SHOW transaction_isolation")).scalar_one()
        assert fresh is False and level == "read committed"
        assert session.in_transaction()  # the caller's transaction was not ended under it


def test_the_snapshot_ends_with_the_block_and_a_write_after_it_works(committed):
    with committed.session() as session:
        with read_snapshot(session) as fresh:
            assert fresh is True
            assert session.execute(sa.text("SHOW transaction_read_only")).scalar_one() == "on"
        assert not session.in_transaction()
        assert session.execute(sa.text("SHOW transaction_read_only")).scalar_one() == "off"


def test_with_a_read_replica_both_connections_read_a_snapshot(pg_url, migrated_template, migrated_database_url):
    """Searches' marked statements run on the replica, synonyms and lexemes on the primary: both are set."""
    probe = sa.text("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only'),"
                    " current_database()")
    with new_database(pg_url, migrated_template) as replica_url:
        primary, replica = create_engine(migrated_database_url, pool_size=1), create_engine(replica_url, pool_size=1)
        try:
            runtime = Runtime(Settings(), primary, read_engine=replica)
            with runtime.session() as session, read_snapshot(session) as fresh:
                marked = tuple(session.execute(probe.execution_options(**{READ_REPLICA: True})).one())
                plain = tuple(session.execute(probe).one())
        finally:
            primary.dispose()
            replica.dispose()
    assert fresh is True and marked[2] != plain[2]  # two servers' worth of connections
    assert marked[:2] == plain[:2] == ("repeatable read", "on")
