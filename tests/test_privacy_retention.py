"""Retention (issue 36) with the clock moved forward: handled raw mail after RETENTION_RAW_MAIL_DAYS, solved
tickets after RETENTION_SOLVED_TICKETS_DAYS (keeping candidates an admin approved), in batches, recorded."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import sqlalchemy as sa

from service.privacy.retention import run_retention

SETUP_SQL = """
WITH solved AS (INSERT INTO tickets (subject, body, customer_email, status, state, solved_by)
                VALUES ('Old question', 'An old question.', 'old@example.com', 'answered', 'solved', 'agent'),
                       ('Older question', 'Another old question.', 'old@example.com', 'answered', 'solved', 'agent')
                RETURNING id),
open_ticket AS (INSERT INTO tickets (subject, body, customer_email, status, state)
                VALUES ('Still open', 'Waiting.', 'old@example.com', 'needs_agent', 'open') RETURNING id),
c AS (INSERT INTO article_candidates (ticket_id, status, title, body, source, action)
      SELECT id, CASE WHEN id = (SELECT min(id) FROM solved) THEN 'approved' ELSE 'pending' END,
             'Candidate', 'Draft text.', 'template', 'new' FROM solved)
INSERT INTO inbound_emails (dedupe_key, sha256, size, raw, status, ticket_id)
SELECT 'k' || n, 'x', 3, 'raw'::bytea, CASE WHEN n = 3 THEN 'received' ELSE 'processed' END, NULL
FROM generate_series(1, 3) n
"""


def _counts(session) -> dict:
    return dict(session.execute(sa.text("""
        SELECT (SELECT count(*) FROM inbound_emails) AS mail,
               (SELECT count(*) FROM tickets WHERE erased_at IS NULL AND customer_email IS NOT NULL) AS tickets,
               (SELECT count(*) FROM article_candidates) AS candidates,
               (SELECT count(*) FROM article_candidates WHERE status = 'approved') AS kept
    """)).mappings().one())


def test_the_sweep_removes_only_what_is_past_retention_when_the_clock_moves(runtime, session):
    runtime.settings = dataclasses.replace(runtime.settings, retention_raw_mail_days=30,
                                           retention_solved_tickets_days=90)
    session.execute(sa.text(SETUP_SQL))
    session.commit()
    now = session.execute(sa.text("SELECT now()")).scalar_one()
    assert run_retention(runtime, now=now + timedelta(days=29)) == run_retention(runtime, now=now)
    assert _counts(session) == {"mail": 3, "tickets": 3, "candidates": 2, "kept": 1}

    run = run_retention(runtime, now=now + timedelta(days=31), batch=1)  # one row a batch: batches repeat
    assert (run.raw_mail, run.tickets) == (2, 0)
    assert _counts(session) == {"mail": 1, "tickets": 3, "candidates": 2, "kept": 1}  # the unhandled one stays

    run = run_retention(runtime, now=now + timedelta(days=91))
    assert run.tickets == 2
    assert run_retention(runtime, now=now + timedelta(days=92)).tickets == 0  # erased once, not again
    assert session.execute(sa.text("SELECT count(*) FROM tickets WHERE subject = '(erased)'")).scalar_one() == 2
    assert _counts(session) == {"mail": 1, "tickets": 1, "candidates": 1, "kept": 1}
    kinds = session.execute(sa.text("SELECT kind, count(*) FROM privacy_events GROUP BY kind ORDER BY kind")).all()
    assert [tuple(row) for row in kinds] == [("retention_raw_mail", 2), ("retention_tickets", 1)]
    assert "old@example.com" not in str(session.execute(sa.text("SELECT counts FROM privacy_events")).all())


def test_unset_solved_ticket_retention_keeps_them_for_ever(runtime, session):
    runtime.settings = dataclasses.replace(runtime.settings, retention_raw_mail_days=0)
    session.execute(sa.text(SETUP_SQL))
    session.commit()
    now = session.execute(sa.text("SELECT now()")).scalar_one()
    assert run_retention(runtime, now=now + timedelta(days=10_000)).tickets == 0
    assert _counts(session)["tickets"] == 3 and _counts(session)["mail"] == 3


def test_the_dashboard_counts_what_retention_removed(runtime, session, admin_client):
    runtime.settings = dataclasses.replace(runtime.settings, retention_raw_mail_days=30)
    session.execute(sa.text(SETUP_SQL))
    session.commit()
    now = session.execute(sa.text("SELECT now()")).scalar_one()
    run_retention(runtime, now=now + timedelta(days=31))
    page = admin_client.get("/admin/dashboard").get_data(as_text=True)
    assert '<strong id="retention-raw-mail">2</strong>' in page
