"""The ``supportrag`` console script through click's CliRunner, on a fresh real database per test."""

from __future__ import annotations

import gc
import json
import time

import numpy as np
import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from click.testing import CliRunner

from service.cli.main import main
from service.db.migrate import alembic_config

from .helpers import run_cli as run
from .helpers import run_cli_json as run_json

ACTIVE_MODEL = "local:all-MiniLM-L6-v2"
RESULT_KEYS = {"id", "title", "category", "snippet", "similarity", "recency", "importance", "score"}
STATS_KEYS = {"articles", "embedded", "pending", "stale", "model", "index"}
# Settings that would change which embedder or weights the commands use.










def head_revision() -> str:
    """The newest migration in migrations/."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_search_on_fresh_database_seeds_and_ranks_reset_password_first_with_score_breakdown(cli_env):
    result = run("search", "I forgot my password")

    lines = result.stdout.splitlines()
    assert lines[0].startswith("1. Reset your password")
    for word in ("similarity", "recency", "importance", "score"):
        assert word in lines[1]
    assert sum(line[:1].isdigit() for line in lines) == 3  # default --limit 3


def test_search_json_lists_results_whose_score_is_the_product_formula(cli_env):
    results = run_json("search", "I forgot my password")

    assert isinstance(results, list) and len(results) == 3
    assert results[0]["title"] == "Reset your password"
    for item in results:
        assert RESULT_KEYS <= item.keys()
        assert item["score"] == pytest.approx(
            item["relevance"] * 0.8 + item["recency"] * 0.2 * item["importance"], abs=1e-9)
        assert item["snippet"]
    assert [item["score"] for item in results] == sorted((item["score"] for item in results), reverse=True)


def test_search_limit_one_returns_exactly_one_result(cli_env):
    results = run_json("search", "I forgot my password", "--limit", "1")

    assert [item["title"] for item in results] == ["Reset your password"]


def test_add_stores_an_embedded_article_that_search_then_ranks_first(cli_env):
    result = run("add", "--title", "Gift wrapping", "--category", "Orders", "--importance", "1.5",
                 "--content", "We can gift wrap any item in your order for a small fee. Choose gift wrap at "
                              "checkout and add a personal message card.")
    assert result.stdout.startswith("added article ")
    assert "(embedded)" in result.stdout

    results = run_json("search", "Can you gift wrap my present?")
    assert results[0]["title"] == "Gift wrapping"
    assert results[0]["category"] == "Orders"
    assert results[0]["importance"] == 1.5
    assert run_json("stats")["articles"] == 6


@pytest.mark.parametrize("title", ["", "   "])
def test_add_with_empty_title_fails_with_one_clear_line_and_stores_nothing(cli_env, title):
    before = run_json("stats")["articles"]

    result = run("add", "--title", title, "--content", "Some text.", expect_success=False)

    assert result.exit_code != 0
    assert "Traceback" not in result.output
    error_lines = result.stderr.strip().splitlines()
    assert len(error_lines) == 1, result.stderr
    assert "title" in error_lines[0] and "must not be empty" in error_lines[0]
    assert run_json("stats")["articles"] == before


def test_add_reads_the_content_from_a_file(cli_env, tmp_path, db_engine):
    content = "Our warehouse ships international orders to Canada and Mexico.\nCustoms fees are paid on delivery.\n"
    path = tmp_path / "article.md"
    path.write_text(content, encoding="utf-8")

    run("add", "--title", "International shipping", "--file", str(path))

    with db_engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT content FROM knowledge_base WHERE title = 'International shipping'"))
        assert stored.scalar_one() == content.strip()
    assert run_json("search", "Do you ship to Canada?")[0]["title"] == "International shipping"


def test_add_refuses_both_or_neither_content_and_file(cli_env, tmp_path):
    path = tmp_path / "article.md"
    path.write_text("text", encoding="utf-8")

    neither = run("add", "--title", "A title", expect_success=False)
    both = run("add", "--title", "A title", "--content", "text", "--file", str(path), expect_success=False)

    for result in (neither, both):
        assert result.exit_code == 2
        assert "exactly one of --content or --file" in result.stderr


def test_stats_json_reports_counts_model_and_no_vector_index(cli_env):
    data = run_json("stats")

    assert STATS_KEYS <= data.keys()
    assert (data["articles"], data["embedded"], data["pending"], data["stale"]) == (5, 5, 0, 0)
    # Each seed article: a lead and four headed sections, each heading also embedded alone.
    assert data["sections"] == {"total": 45, "embedded": 45, "pending": 0}
    assert data["model"] == ACTIVE_MODEL
    assert data["index"] is None


def test_stats_text_shows_each_count_on_its_own_line(cli_env):
    output = run("stats").stdout

    for key in ("articles", "embedded", "pending", "stale", "model", "index"):
        assert any(line.strip().startswith(f"{key}:") for line in output.splitlines()), output


def test_seed_inserts_the_default_articles_once_then_says_already_seeded(cli_env):
    first = run("seed")
    second = run("seed")

    assert first.stdout.strip() == "inserted 5 articles"
    assert "already seeded" in second.stdout
    assert run_json("stats")["articles"] == 5


def test_seed_remove_deletes_the_unedited_defaults_and_they_never_come_back(cli_env, db_engine):
    run("seed")
    with db_engine.begin() as conn:
        conn.execute(sa.text("UPDATE knowledge_base SET content = content || ' Edited.' WHERE id = "
                             "(SELECT min(id) FROM knowledge_base)"))
    assert run("seed", "--remove").stdout.strip() == "removed 4 default articles"
    assert "already seeded" in run("seed").stdout
    assert run_json("stats")["articles"] == 1


def test_reembed_embeds_exactly_the_pending_and_stale_rows(cli_env, db_engine):
    run("seed")
    with db_engine.begin() as conn:
        ids = conn.execute(sa.text("SELECT id FROM knowledge_base ORDER BY id")).scalars().all()
        originals = {row.id: np.array(json.loads(row.vector)) for row in conn.execute(
            sa.text("SELECT id, embedding::text AS vector FROM knowledge_base"))}
        pending, stale = ids[:2], ids[2:3]
        conn.execute(sa.text("UPDATE knowledge_base SET embedding = NULL, embedding_half = NULL, "
                             "embedding_model = NULL "
                             "WHERE id = ANY(:ids)"), {"ids": pending})
        conn.execute(sa.text("UPDATE knowledge_base SET embedding_model = 'old-model' WHERE id = ANY(:ids)"),
                     {"ids": stale})
    before = run_json("stats")
    assert (before["embedded"], before["pending"], before["stale"]) == (2, 2, 1)

    result = run("reembed")

    assert f"re-embedded 3 articles with {ACTIVE_MODEL}" in result.stdout
    after = run_json("stats")
    assert (after["articles"], after["embedded"], after["pending"], after["stale"]) == (5, 5, 0, 0)
    with db_engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, embedding_model, content_sha256, embedding::text AS vector "
                                    "FROM knowledge_base")).all()
    for row in rows:
        assert row.embedding_model == ACTIVE_MODEL and row.content_sha256
        # The same text under the same model gives the same vector back.
        np.testing.assert_allclose(np.array(json.loads(row.vector)), originals[row.id], atol=1e-5)


def test_reembed_with_nothing_to_do_reports_zero(cli_env):
    assert "re-embedded 0 articles" in run("reembed").stdout


def public_tables(engine: sa.Engine) -> set[str]:
    """Tables in the public schema, Alembic's bookkeeping table aside."""
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_name <> 'alembic_version'")).scalars())


def test_db_upgrade_current_downgrade_and_upgrade_again(empty_cli_env, empty_db_engine):
    head = head_revision()

    assert run("db", "current").stdout.strip() == "none"
    assert run("db", "upgrade").stdout.strip() == f"database at revision {head}"
    assert run("db", "current").stdout.strip() == head
    assert {"knowledge_base", "app_state"} <= public_tables(empty_db_engine)

    run("db", "downgrade", "base")
    assert run("db", "current").stdout.strip() == "none"
    assert public_tables(empty_db_engine) == set()

    assert run("db", "upgrade").stdout.strip() == f"database at revision {head}"
    assert run("db", "current").stdout.strip() == head
    with empty_db_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one() == 0


def test_db_commands_do_not_seed(cli_env, db_engine):
    run("db", "upgrade")

    with db_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one() == 0


def other_connections(engine: sa.Engine) -> int:
    """Sessions on the test database other than the one asking."""
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity "
                                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar_one()


@pytest.mark.parametrize("args", [["stats"], ["search", "refund"], ["db", "current"]])
def test_each_command_closes_its_database_connections_before_returning(cli_env, db_engine, args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output

    try:
        deadline = time.monotonic() + 5  # a closed client's backend leaves pg_stat_activity asynchronously
        while other_connections(db_engine) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert other_connections(db_engine) == 0
    finally:
        gc.collect()  # finalise any leaked connection here rather than in a later test
