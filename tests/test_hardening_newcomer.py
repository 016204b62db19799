"""Issue 16, found by a newcomer: a fresh clone's test run skips what needs ../shared, and cleans up after itself."""

from __future__ import annotations

import psutil
import pytest

from .conftest import REQUIRE_SHARED_VARIABLE, shared_eval_set, temporary_postgres
from .test_reliability_restart import restart


def test_newcomer_without_shared_data_the_evaluation_tests_skip_and_say_why(tmp_path):
    with pytest.raises(pytest.skip.Exception, match="evaluation set not found .* set SUPPORTRAG_SHARED_DIR"):
        shared_eval_set("stackfaq_dev", {"SUPPORTRAG_SHARED_DIR": str(tmp_path)})


def test_newcomer_ci_turns_the_missing_shared_data_into_a_failure(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="evaluation set not found"):
        shared_eval_set("stackfaq_dev", {"SUPPORTRAG_SHARED_DIR": str(tmp_path), REQUIRE_SHARED_VARIABLE: "1"})


def test_newcomer_ci_requires_the_shared_data():
    from .conftest import REPO_ROOT

    assert f"export {REQUIRE_SHARED_VARIABLE}=1" in (REPO_ROOT / ".ci" / "run").read_text()


def test_newcomer_a_test_server_is_stopped_and_its_folder_deleted_even_after_a_restart_and_a_failure():
    with pytest.raises(RuntimeError, match="the test failed"):
        with temporary_postgres("supportrag-test-", "cleanup") as (_, server, root):
            restart(server)  # pgserver's handle now knows only the old postmaster
            postmaster = int((root / "pgdata" / "postmaster.pid").read_text().split()[0])
            raise RuntimeError("the test failed")
    assert not root.exists()  # no supportrag-test-* folder left behind, not even empty
    assert not psutil.pid_exists(postmaster) or psutil.Process(postmaster).status() == psutil.STATUS_ZOMBIE


def test_newcomer_the_extractive_answer_keeps_a_bulleted_list_a_list(anonymous_client, seeded):
    from .test_help import asked

    # a question whose best section is the seed refund article's bulleted "Refund policy"
    _, _, html = asked(anonymous_client, "What are the rules for returning items for a refund?")
    answer = html.split('class="answer-text"', 1)[1].split("</div>", 1)[0]
    assert answer.count("<li>") >= 3 and "• " not in answer


def test_newcomer_the_documented_search_example_is_what_the_command_prints(cli_env):
    from .conftest import REPO_ROOT
    from .helpers import run_cli

    page = (REPO_ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    command = '$ supportrag search "I forgot my password" --limit 1\n'
    example = page.split(command, 1)[1].split("```", 1)[0]
    printed = run_cli("search", "I forgot my password", "--limit", "1").output
    assert printed.strip().splitlines() == example.strip().splitlines()
