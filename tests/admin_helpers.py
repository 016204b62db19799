"""Helpers for tests that log in to the admin pages through the real login form."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

ADMIN_USERNAME = "lead"
ADMIN_PASSWORD = "correct horse battery"
_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)"')


def csrf_from(html: str) -> str:
    """The CSRF token a page embeds (hidden form field or the meta tag the JavaScript reads)."""
    match = _CSRF_FIELD.search(html) or _CSRF_META.search(html)
    assert match, "no CSRF token on the page"
    return match.group(1)


def log_in(client: FlaskClient, username: str = ADMIN_USERNAME, password: str = ADMIN_PASSWORD,
           next_url: str | None = None):
    """Fill in and submit the login form; returns the POST's response."""
    token = csrf_from(client.get("/admin/login").get_data(as_text=True))
    form = {"csrf_token": token, "username": username, "password": password}
    if next_url is not None:
        form["next"] = next_url
    return client.post("/admin/login", data=form)


def api_session(client: FlaskClient, username: str, password: str = ADMIN_PASSWORD) -> FlaskClient:
    """``client`` logged in as ``username``, sending its session's CSRF token on every request (the JSON API's
    header), as the workspace's JavaScript does."""
    assert log_in(client, username, password).status_code == 302
    client.get("/admin/inbox")
    with client.session_transaction() as browser_session:
        client.environ_base["HTTP_X_CSRF_TOKEN"] = browser_session["csrf"]
    return client
