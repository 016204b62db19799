"""Issue 16, items 2 and 8: sessions end on the server; every cookie-authenticated write needs the CSRF token."""

from __future__ import annotations

import sqlalchemy as sa
from flask.testing import FlaskClient

from .admin_helpers import csrf_from, log_in
from .helpers import assert_error

ARTICLE = {"title": "Gift cards", "content": "Check a gift card's balance under Account."}


def copy_of(app, browser: FlaskClient) -> FlaskClient:
    """Another client holding a copy of ``browser``'s session cookie (as an attacker who read it would)."""
    thief = app.test_client()
    cookie = browser.get_cookie("supportrag_session")
    assert cookie is not None
    thief.set_cookie("supportrag_session", cookie.value)
    return thief


def logged_in(app) -> tuple[FlaskClient, str]:
    """A browser logged in through the form, and the CSRF token its pages carry."""
    browser = app.test_client()
    assert log_in(browser).status_code == 302
    return browser, csrf_from(browser.get("/admin/articles").get_data(as_text=True))


def age_sessions(runtime, column: str, seconds: int) -> None:
    """Move every stored session's ``column`` back in time (the test's transaction is rolled back after)."""
    with runtime.session() as session:
        session.execute(sa.text(f"UPDATE admin_sessions SET {column} = {column} - make_interval(secs => :s)"),
                        {"s": seconds})


def test_item_2_logout_ends_the_session_for_a_copied_cookie_too(app, admin_account):
    browser, token = logged_in(app)
    thief = copy_of(app, browser)
    assert thief.get("/admin/articles").status_code == 200
    assert thief.post("/api/articles", json=ARTICLE, headers={"X-CSRF-Token": token}).status_code == 201

    assert browser.post("/admin/logout", data={"csrf_token": token}).status_code == 302
    assert thief.get("/admin/articles").status_code == 302  # to the login form
    assert_error(thief.post("/api/articles", json=ARTICLE, headers={"X-CSRF-Token": token}), 401, "unauthorized")


def test_item_2_logout_survives_a_new_app_as_after_a_restart(app, runtime, admin_account):
    from service.web.app import create_app

    browser, token = logged_in(app)
    cookie = browser.get_cookie("supportrag_session").value
    browser.post("/admin/logout", data={"csrf_token": token})
    restarted = create_app({"TESTING": True}, runtime=runtime).test_client()
    restarted.set_cookie("supportrag_session", cookie)
    assert restarted.get("/admin/articles").status_code == 302


def test_item_2_log_out_everywhere_ends_every_session_of_the_account(app, admin_account):
    first, token = logged_in(app)
    second, _ = logged_in(app)
    assert second.get("/admin/articles").status_code == 200
    response = first.post("/admin/logout-everywhere", data={"csrf_token": token})
    assert response.status_code == 302
    assert second.get("/admin/articles").status_code == 302
    assert first.get("/admin/articles").status_code == 302
    page = first.get("/admin/login").get_data(as_text=True)
    assert "Logged out everywhere (2 sessions ended)" in page


def test_item_2_a_session_ends_after_the_idle_timeout(app, runtime, admin_account):
    browser, _ = logged_in(app)
    age_sessions(runtime, "last_seen_at", runtime.settings.session_idle_seconds - 60)
    assert browser.get("/admin/articles").status_code == 200  # used within the timeout: still alive, clock reset
    age_sessions(runtime, "last_seen_at", runtime.settings.session_idle_seconds + 1)
    assert browser.get("/admin/articles").status_code == 302


def test_item_2_a_session_ends_at_its_absolute_lifetime_however_busy(app, runtime, admin_account):
    browser, _ = logged_in(app)
    age_sessions(runtime, "expires_at", runtime.settings.session_lifetime_seconds - 1)
    assert browser.get("/admin/articles").status_code == 200  # one second left
    age_sessions(runtime, "expires_at", 2)
    assert browser.get("/admin/articles").status_code == 302


def test_item_2_the_cookie_holds_a_session_key_and_the_database_only_its_hash(app, runtime, admin_account):
    browser, _ = logged_in(app)
    with runtime.session() as session:
        stored = session.execute(sa.text("SELECT key_sha256, expires_at - created_at AS lifetime "
                                         "FROM admin_sessions")).one()
    assert abs(stored.lifetime.total_seconds() - runtime.settings.session_lifetime_seconds) < 1
    assert stored.key_sha256 not in browser.get_cookie("supportrag_session").value


def test_item_8_cookie_authenticated_feedback_without_csrf_is_refused(seeded, app, anonymous_client, admin_account):
    created = anonymous_client.post("/api/tickets", json={"subject": "Refund", "body": "How do I get a refund?"})
    ticket_id = created.get_json()["ticket"]["id"]
    browser, token = logged_in(app)
    refused = browser.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": True})
    assert_error(refused, 403, "csrf_failed")
    accepted = browser.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": True},
                            headers={"X-CSRF-Token": token})
    assert accepted.status_code == 201


def test_item_8_cookie_authenticated_public_writes_all_need_csrf(seeded, app, admin_account):
    browser, token = logged_in(app)
    for path, body in (("/api/tickets", {"subject": "Refund", "body": "How do I get a refund?"}),
                       ("/api/search", {"query": "refund"})):
        assert_error(browser.post(path, json=body), 403, "csrf_failed")
        assert browser.post(path, json=body, headers={"X-CSRF-Token": token}).status_code in (200, 201)
