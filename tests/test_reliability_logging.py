"""Nothing sensitive reaches the logs: passwords, API tokens, ticket secrets, ticket bodies and e-mails,
even when a request fails inside the database."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from .admin_helpers import ADMIN_PASSWORD, log_in
from .conftest import bearer_environ

BODY = "My account number is 4111-1111-1111-1111 and I want a refund"
EMAIL = "private.person@example.com"


def test_logs_hold_no_passwords_tokens_secrets_bodies_or_emails(seeded, app, admin_account, caplog, runtime):
    token = bearer_environ(runtime)["HTTP_AUTHORIZATION"].split()[1]
    with caplog.at_level(logging.DEBUG):
        browser = app.test_client()
        log_in(browser, password="wrong password here")
        log_in(browser)
        script = app.test_client()
        created = script.post("/api/tickets", json={"subject": "Refund", "body": BODY, "email": EMAIL},
                              headers={"Authorization": f"Bearer {token}"})
        secret = created.get_json()["secret"]
        script.post(f"/api/tickets/{created.get_json()['ticket']['id']}/feedback", json={"helpful": True},
                    headers={"X-Ticket-Secret": secret})
    logged = caplog.text
    for sensitive in (ADMIN_PASSWORD, "wrong password here", token, secret, BODY, EMAIL):
        assert sensitive not in logged


def test_database_errors_do_not_list_the_bound_values(engine):
    # SQLAlchemy would append every bound value to the error text; only PostgreSQL's own message may quote the
    # one value it refused, which is why the error handlers log a database error's type and not its text.
    with engine.connect() as conn:
        try:
            conn.execute(sa.text("SELECT CAST(:value AS integer), :email"), {"value": "x", "email": EMAIL})
        except sa.exc.DataError as exc:
            message = str(exc)
        else:
            raise AssertionError("the cast should have failed")
    assert "SQL parameters hidden" in message and EMAIL not in message
