"""``supportrag importance …`` and ``supportrag candidates …`` on a fresh real database."""

from __future__ import annotations

import sqlalchemy as sa

from .helpers import run_cli as run
from .helpers import run_cli_json as run_json

SOLVED_TICKETS = sa.text("""
WITH t AS (
    INSERT INTO tickets (subject, body, status, resolved_at, escalated_at)
    SELECT 'question ' || n, 'question ' || n, 'answered',
           CASE WHEN n <= :solved THEN now() END, CASE WHEN n > :solved THEN now() END
    FROM generate_series(1, :total) AS n
    RETURNING id
)
INSERT INTO ticket_citations (ticket_id, article_id, article_title, rank, cited, recency, importance, score)
SELECT t.id, :article, 'seed', 1, true, 1, 1, 1 FROM t
""")


def test_importance_proposals_apply_set_and_log_from_the_console(cli_env, db_engine):
    run("seed")
    with db_engine.begin() as conn:
        first, second = conn.execute(sa.text("SELECT id FROM knowledge_base ORDER BY id LIMIT 2")).scalars()
        conn.execute(SOLVED_TICKETS, {"solved": 5, "total": 5, "article": first})
        conn.execute(SOLVED_TICKETS, {"solved": 0, "total": 5, "article": second})
    proposals = {p["article_id"]: p for p in run_json("importance", "proposals")}
    assert {a: p["proposed_importance"] for a, p in proposals.items()} == {first: 1.25, second: 0.75}
    assert "5 solved, 0 escalated" in run("importance", "proposals", "--no-recount").stdout
    assert "1 → 1.25" in run("importance", "apply", str(proposals[first]["id"])).stdout
    assert "dismissed" in run("importance", "dismiss", str(proposals[second]["id"])).stdout
    again = run("importance", "apply", str(proposals[first]["id"]), expect_success=False)
    assert again.exit_code == 1 and "is applied, not pending" in again.output
    assert "importance 0.5" in run("importance", "set", str(second), "0.5").stdout
    log = run_json("importance", "log", str(first))
    assert [(c["reason"], c["proposal_id"], c["actor"], c["new_importance"]) for c in log] == \
        [("proposal", proposals[first]["id"], "cli", 1.25)]
    assert run_json("importance", "log", str(second))[0]["reason"] == "cli"
    assert "must be between" in run("importance", "set", str(second), "3", expect_success=False).output
    assert "no article 999999" in run("importance", "set", "999999", "1", expect_success=False).output


def test_candidates_list_approve_and_reject_from_the_console(cli_env, db_engine):
    run("seed")
    with db_engine.begin() as conn:
        conn.execute(sa.text("""
            INSERT INTO article_candidates (title, body, source, action)
            VALUES ('Collecting an order from the warehouse', 'Choose Warehouse pickup at checkout.', 'template', 'new'),
                   ('Spam', 'Nothing useful.', 'template', 'new')"""))
    listed = run_json("candidates", "list")
    assert [c["title"] for c in listed] == ["Spam", "Collecting an order from the warehouse"]
    spam, pickup = (c["id"] for c in listed)
    assert "published article" in run("candidates", "approve", str(pickup), "--category", "Shipping").stdout
    assert "rejected" in run("candidates", "reject", str(spam)).stdout
    assert run("candidates", "list").stdout.strip() == "no pending candidates"
    found = run_json("search", "warehouse pickup")
    assert found[0]["title"] == "Collecting an order from the warehouse"
    merge = run("candidates", "merge", str(pickup), expect_success=False)
    assert merge.exit_code == 1 and "not pending" in merge.output
