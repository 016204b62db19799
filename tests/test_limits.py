"""Abuse limits: feedback only from the ticket's submitter or an admin; rate limits; login lockout; headers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa

from service.config import ConfigError, Settings
from service.web.app import create_app

from .admin_helpers import log_in
from .helpers import assert_error

TICKET = {"subject": "Refund", "body": "I want a refund for my order"}


def submit(client) -> dict[str, Any]:
    """POST a ticket; return the 201 body (ticket and secret)."""
    response = client.post("/api/tickets", json=TICKET)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()


def test_feedback_needs_the_tickets_secret_unless_an_admin_sends_it(seeded, anonymous_client, client):
    created = submit(anonymous_client)
    ticket_id, secret = created["ticket"]["id"], created["secret"]
    url = f"/api/tickets/{ticket_id}/feedback"

    assert_error(anonymous_client.post(url, json={"helpful": False}), 403, "forbidden")
    assert_error(anonymous_client.post(url, json={"helpful": False}, headers={"X-Ticket-Secret": "guess"}),
                 403, "forbidden")
    other = submit(anonymous_client)["secret"]  # another ticket's secret proves nothing here
    assert_error(anonymous_client.post(url, json={"helpful": False}, headers={"X-Ticket-Secret": other}),
                 403, "forbidden")
    assert client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]["feedback"] == []

    assert anonymous_client.post(url, json={"helpful": True}, headers={"X-Ticket-Secret": secret}).status_code == 201
    assert client.post(url, json={"helpful": False, "comment": "agent note"}).status_code == 201
    assert [f["helpful"] for f in client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]["feedback"]] == [
        True, False]


def test_feedback_on_a_missing_ticket_is_404_even_without_a_secret(seeded, anonymous_client):
    assert_error(anonymous_client.post("/api/tickets/999999/feedback", json={"helpful": True}), 404, "not_found")


@pytest.fixture
def limited(runtime):
    """Apps ("workers") on the test runtime with small limits: 2 tickets and 3 feedbacks a minute, 3 logins an hour
    (four slow password checks on a loaded machine could straddle a fixed one-minute window and start a new one)."""
    runtime.settings = replace(runtime.settings, rate_limit_tickets=(2, 60), rate_limit_feedback=(3, 60),
                               rate_limit_login=(3, 3600), login_lockout=(2, 900))
    return runtime


def client_at(runtime, address: str):
    """A fresh app (as a separate gunicorn worker would build) and an anonymous client from ``address``."""
    test_client = create_app({"TESTING": True}, runtime=runtime).test_client()
    test_client.environ_base["REMOTE_ADDR"] = address
    return test_client


def test_ticket_submissions_are_limited_per_address_across_workers_with_retry_after(seeded, limited, client):
    worker_a, worker_b = client_at(limited, "203.0.113.7"), client_at(limited, "203.0.113.7")
    assert worker_a.post("/api/tickets", json=TICKET).status_code == 201
    assert worker_b.post("/api/tickets", json=TICKET).status_code == 201
    refused = worker_a.post("/api/tickets", json=TICKET)
    error = assert_error(refused, 429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert error["details"] == {"limit": "2 per 60 seconds", "retry_after": int(refused.headers["Retry-After"])}
    assert client_at(limited, "198.51.100.1").post("/api/tickets", json=TICKET).status_code == 201  # other address
    assert client.post("/api/tickets", json=TICKET).status_code == 201  # admins are not limited
    assert client.get("/api/tickets").get_json()["total"] == 4  # the refused one was not stored


def test_feedback_is_limited_per_address(seeded, limited, client):
    created = client.post("/api/tickets", json=TICKET).get_json()
    customer = client_at(limited, "203.0.113.9")
    url, headers = f"/api/tickets/{created['ticket']['id']}/feedback", {"X-Ticket-Secret": created["secret"]}
    assert [customer.post(url, json={"helpful": True}, headers=headers).status_code for _ in range(4)] == [
        201, 201, 201, 429]


def test_a_username_is_locked_for_one_address_after_failed_logins_even_with_the_right_password(limited, admin_account):
    username, password = admin_account
    for _ in range(2):
        assert log_in(client_at(limited, "203.0.113.1"), username, "wrong password!").status_code == 401
    locked = log_in(client_at(limited, "203.0.113.1"), username, password)
    assert locked.status_code == 429
    assert locked.mimetype == "text/html" and int(locked.headers["Retry-After"]) > 60
    assert "locked" in locked.get_data(as_text=True)
    assert log_in(client_at(limited, "203.0.113.2"), "someone-else", "wrong password!").status_code == 401


def test_login_attempts_are_limited_per_address(limited, admin_account):
    browser = client_at(limited, "203.0.113.5")
    statuses = [log_in(browser, f"nobody{i}", "wrong password!").status_code for i in range(4)]
    assert statuses == [401, 401, 401, 429]


def test_rate_limit_settings_are_read_from_the_environment():
    settings = Settings.from_env({"SUPPORTRAG_RATE_LIMIT_TICKETS": "3/hour", "SUPPORTRAG_RATE_LIMIT_FEEDBACK": "off",
                                  "SUPPORTRAG_RATE_LIMIT_LOGIN": "20/60", "SUPPORTRAG_LOGIN_LOCKOUT": "10/30minutes"})
    assert (settings.rate_limit_tickets, settings.rate_limit_feedback) == ((3, 3600), None)
    assert (settings.rate_limit_login, settings.login_lockout) == ((20, 60), (10, 1800))
    with pytest.raises(ConfigError, match="SUPPORTRAG_RATE_LIMIT_TICKETS"):
        Settings.from_env({"SUPPORTRAG_RATE_LIMIT_TICKETS": "lots"})


@pytest.mark.parametrize("path, csp", [("/api/articles", "default-src 'none'"), ("/healthz", "default-src 'none'"),
                                       ("/admin/login", "default-src 'self'"), ("/api/nope", "default-src 'none'")])
def test_security_headers_on_every_response(anonymous_client, path, csp):
    headers = anonymous_client.get(path).headers
    assert headers["Content-Security-Policy"].startswith(csp)
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] in ("no-referrer", "same-origin")


def test_behind_a_proxy_the_forwarded_address_is_the_one_limited(seeded, limited):
    limited.settings = replace(limited.settings, proxy_hops=1)
    proxy = client_at(limited, "10.0.0.1")  # every request arrives from the proxy itself
    first = {"X-Forwarded-For": "203.0.113.20"}
    assert [proxy.post("/api/tickets", json=TICKET, headers=first).status_code for _ in range(3)] == [201, 201, 429]
    assert proxy.post("/api/tickets", json=TICKET, headers={"X-Forwarded-For": "203.0.113.21"}).status_code == 201


def test_the_help_center_forms_share_the_ticket_limit_and_answer_429_as_a_page(seeded, limited):
    from .admin_helpers import csrf_from

    customer = client_at(limited, "203.0.113.20")

    def ask() -> Any:
        token = csrf_from(customer.get("/help").get_data(as_text=True))
        return customer.post("/help/ask", data={"csrf_token": token, "description": "I forgot my password"})

    assert ask().status_code == 303
    assert customer.post("/api/tickets", json=TICKET).status_code == 201  # the same budget as the API
    refused = ask()
    assert refused.status_code == 429 and refused.mimetype == "text/html"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert "too many tickets requests" in refused.get_data(as_text=True)


def test_a_lock_lasts_a_full_window_from_the_failure_that_set_it_and_then_lifts(limited, admin_account, runtime):
    username, password = admin_account
    for _ in range(2):
        assert log_in(client_at(limited, "203.0.113.9"), username, "wrong password!").status_code == 401
    locked = log_in(client_at(limited, "203.0.113.9"), username, password)
    assert locked.status_code == 429 and 890 <= int(locked.headers["Retry-After"]) <= 900  # the 900 s window
    with runtime.session() as session:  # the lock runs out (as if 15 minutes had passed)
        session.execute(sa.text("UPDATE login_throttles SET locked_until = clock_timestamp() - interval '1 second'"))
        session.execute(sa.text("DELETE FROM rate_limit_counters"))  # and the per-address minute
    assert log_in(client_at(limited, "203.0.113.9"), username, password).status_code == 302
