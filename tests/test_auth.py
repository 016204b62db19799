"""Authentication and access: passwords, API tokens, the access policy, CSRF, login/logout, cookies."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from service.accounts import (
    SECRET_KEY_STATE,
    authenticate,
    create_admin,
    create_token,
    hash_password,
    list_tokens,
    revoke_token,
    set_admin_password,
    token_identity,
    verify_password,
)
from service.config import Settings
from service.db.models import ApiToken, AppState
from service.runtime import Runtime
from service.validation import ValidationError
from service.web.access import PUBLIC_ENDPOINTS, SAFE_METHODS, TOGGLED_ENDPOINTS, is_public
from service.web.app import create_app

from .admin_helpers import ADMIN_PASSWORD, ADMIN_USERNAME, csrf_from, log_in
from .conftest import bearer_environ
from .helpers import assert_error


def new_article(client, **fields) -> dict[str, Any]:
    """Create an article with the authenticated client."""
    response = client.post("/api/articles", json={"title": "Gift cards", "content": "Balance under Account.",
                                                  **fields})
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["article"]


def app_with(runtime: Runtime, **settings_changes):
    """An app on the test transaction with some settings changed."""
    changed = Runtime(replace(runtime.settings, **settings_changes), runtime.engine, runtime.embedder)
    changed.sessions = runtime.sessions
    return create_app({"TESTING": True}, runtime=changed)


# --- passwords and accounts ----------------------------------------------------------------------

def test_password_hash_is_salted_werkzeug_hash_that_verifies_only_the_right_password():
    first, second = hash_password("s3cret-passphrase"), hash_password("s3cret-passphrase")
    assert first != second  # salted
    assert "s3cret-passphrase" not in first
    assert first.startswith(("scrypt:", "pbkdf2:"))
    assert verify_password(first, "s3cret-passphrase")
    assert not verify_password(first, "s3cret-passphrasE")


def test_authenticate_accepts_the_right_password_only_and_usernames_ignore_case(session):
    created = create_admin(session, "  Lead@Example.com ", ADMIN_PASSWORD)
    assert created.username == "lead@example.com"
    assert authenticate(session, "LEAD@example.com", ADMIN_PASSWORD).id == created.id
    assert authenticate(session, "lead@example.com", ADMIN_PASSWORD + "x") is None
    assert authenticate(session, "nobody", ADMIN_PASSWORD) is None
    assert authenticate(session, "", "") is None


@pytest.mark.parametrize("username, password, field", [
    ("lead", "short", "password"),
    ("lead", "x" * 1025, "password"),
    ("", ADMIN_PASSWORD, "username"),
    ("has space", ADMIN_PASSWORD, "username"),
    ("-dash-first", ADMIN_PASSWORD, "username"),
    ("a" * 65, ADMIN_PASSWORD, "username"),
])
def test_create_admin_refuses_weak_passwords_and_odd_usernames(session, username, password, field):
    with pytest.raises(ValidationError) as caught:
        create_admin(session, username, password)
    assert field in caught.value.details


def test_create_admin_refuses_a_taken_username(session):
    create_admin(session, "lead", ADMIN_PASSWORD)
    with pytest.raises(ValidationError) as caught:
        create_admin(session, "LEAD", ADMIN_PASSWORD)
    assert "username" in caught.value.details


# --- API tokens ----------------------------------------------------------------------------------

def test_token_is_stored_only_as_its_sha256_and_stops_working_once_revoked(session):
    info, secret = create_token(session, "nightly import")
    assert secret.startswith("srt_") and len(secret) > 40
    stored = session.scalars(sa.select(ApiToken.token_sha256)).all()
    assert stored == [hashlib.sha256(secret.encode()).hexdigest()]
    assert token_identity(session, secret).id == info.id
    assert token_identity(session, secret + "x") is None

    revoked = revoke_token(session, info.id)
    assert revoked.revoked_at is not None
    assert token_identity(session, secret) is None
    assert revoke_token(session, info.id).revoked_at == revoked.revoked_at  # revoking twice keeps the time
    assert [t.name for t in list_tokens(session)] == ["nightly import"]


def test_revoked_token_gets_401_from_the_api(app, runtime, anonymous_client):
    environ = bearer_environ(runtime, "short-lived")
    assert anonymous_client.post("/api/articles", json={"title": "t", "content": "c"},
                                 environ_base=environ).status_code == 201
    with runtime.session() as session:
        revoke_token(session, session.scalars(sa.select(ApiToken.id).where(ApiToken.name == "short-lived")).one())
    response = anonymous_client.post("/api/articles", json={"title": "t", "content": "c"}, environ_base=environ)
    assert_error(response, 401, "invalid_token")


def test_unknown_bearer_token_is_401_even_on_public_endpoints_but_other_schemes_are_ignored(anonymous_client):
    assert_error(anonymous_client.get("/api/stats", headers={"Authorization": "Bearer srt_nope"}),
                 401, "invalid_token")
    assert anonymous_client.get("/api/stats", headers={"Authorization": "Basic dXNlcjpwYXNz"}).status_code == 200


# --- the access policy ---------------------------------------------------------------------------

ADMIN_ONLY_REQUESTS = [
    ("post", "/api/articles", {"json": {"title": "t", "content": "c"}}),
    ("patch", "/api/articles/{id}", {"json": {"importance": 1.8}}),
    ("delete", "/api/articles/{id}", {}),
    ("post", "/api/admin/preview", {"json": {"query": "refund"}}),
    ("get", "/api/tickets", {}),
    ("get", "/api/tickets/1", {}),
    ("get", "/api/reports/gaps", {}),
]


@pytest.mark.parametrize("method, path, kwargs", ADMIN_ONLY_REQUESTS,
                         ids=[f"{m.upper()} {p}" for m, p, _ in ADMIN_ONLY_REQUESTS])
def test_admin_endpoint_without_token_is_401_in_the_error_shape_and_changes_nothing(
        client, anonymous_client, method, path, kwargs):
    article = new_article(client, importance=1.2)
    response = getattr(anonymous_client, method)(path.format(id=article["id"]), **kwargs)
    assert_error(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/api/articles").get_json()["articles"] == [article]


def test_every_write_endpoint_not_declared_public_answers_401_to_anonymous_callers(app, anonymous_client):
    # Walks the whole URL map, so an endpoint added later is covered without editing this test.
    checked, leaks = 0, []
    for rule in app.url_map.iter_rules():
        for method in sorted((rule.methods or set()) - SAFE_METHODS):
            if is_public(rule.endpoint, app.extensions["supportrag"].settings):
                continue
            path = rule.rule.replace("<int:", "<").replace("<path:", "<")
            for name in rule.arguments:
                path = path.replace(f"<{name}>", "1")
            response = anonymous_client.open(path, method=method, json={})
            checked += 1
            # Pages send people to the login form, or refuse a form without its CSRF token.
            expected = {302, 403} if path.startswith("/admin/") else {401}
            if response.status_code not in expected:
                leaks.append((method, rule.rule, response.status_code))
    assert checked >= 5
    assert leaks == []


def test_public_surfaces_work_without_credentials(anonymous_client, client):
    new_article(client)
    assert anonymous_client.get("/healthz").status_code == 200
    assert anonymous_client.get("/api/articles").status_code == 200
    assert anonymous_client.get("/api/stats").status_code == 200
    assert anonymous_client.post("/api/search", json={"query": "gift card"}).status_code == 200
    created = anonymous_client.post("/api/tickets", json={"subject": "Gift card", "body": "Where is the balance?"})
    assert created.status_code == 201
    ticket_id, secret = created.get_json()["ticket"]["id"], created.get_json()["secret"]
    assert anonymous_client.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": True},
                                 headers={"X-Ticket-Secret": secret}).status_code == 201
    # Reading tickets back exposes customer emails: admins only.
    assert_error(anonymous_client.get(f"/api/tickets/{ticket_id}"), 401, "unauthorized")
    assert client.get(f"/api/tickets/{ticket_id}").status_code == 200


@pytest.mark.parametrize("setting, method, path, body", [
    ("public_search", "post", "/api/search", {"query": "gift card"}),
    ("public_tickets", "post", "/api/tickets", {"subject": "Gift card", "body": "Where is the balance?"}),
])
def test_turning_off_public_search_or_tickets_requires_a_token(runtime, setting, method, path, body):
    app = app_with(runtime, **{setting: False})
    anonymous = app.test_client()
    assert_error(getattr(anonymous, method)(path, json=body), 401, "unauthorized")
    authenticated = app.test_client()
    authenticated.environ_base.update(bearer_environ(runtime))
    assert getattr(authenticated, method)(path, json=body).status_code in (200, 201)


@pytest.mark.parametrize("env, search, tickets", [
    ({}, True, True),
    ({"SUPPORTRAG_PUBLIC_SEARCH": "0"}, False, True),
    ({"SUPPORTRAG_PUBLIC_TICKETS": "false"}, True, False),
    ({"SUPPORTRAG_PUBLIC_SEARCH": "no", "SUPPORTRAG_PUBLIC_TICKETS": "0"}, False, False),
])
def test_public_toggles_are_read_from_the_environment(env, search, tickets):
    settings = Settings.from_env(env)
    assert (settings.public_search, settings.public_tickets) == (search, tickets)
    assert is_public("api.search", settings) is search
    assert is_public("tickets_api.tickets_create", settings) is tickets
    assert is_public("tickets_api.tickets_feedback", settings) is tickets


def test_policy_names_only_endpoints_that_exist(app):
    endpoints = set(app.view_functions)
    assert (PUBLIC_ENDPOINTS | set(TOGGLED_ENDPOINTS)) <= endpoints


# --- sessions, CSRF and cookies ------------------------------------------------------------------

def test_anonymous_admin_page_redirects_to_login_with_next(anonymous_client):
    response = anonymous_client.get("/admin/articles?page=2")
    assert response.status_code == 302
    assert response.headers["Location"] == "/admin/login?next=/admin/articles?page%3D2"


def test_login_then_logout(app, admin_account):
    browser = app.test_client()
    response = log_in(browser, next_url="/admin/tickets")
    assert (response.status_code, response.headers["Location"]) == (302, "/admin/tickets")
    assert browser.get("/admin/tickets").status_code == 200

    page = browser.get("/admin/articles").get_data(as_text=True)
    assert browser.post("/admin/logout", data={"csrf_token": csrf_from(page)}).status_code == 302
    assert browser.get("/admin/articles").status_code == 302


def test_wrong_password_is_refused_with_a_message(app, admin_account):
    browser = app.test_client()
    response = log_in(browser, password="not the password")
    assert response.status_code == 401
    assert "Wrong username or password" in response.get_data(as_text=True)
    assert browser.get("/admin/articles").status_code == 302


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/admin", "/api/tickets", "javascript:x"])
def test_login_never_redirects_off_the_admin_pages(app, admin_account, target):
    response = log_in(app.test_client(), next_url=target)
    assert response.headers["Location"] == "/admin/articles"


def test_session_cookie_is_httponly_samesite_lax_and_secure_only_when_configured(app, runtime, admin_account):
    cookie = log_in(app.test_client()).headers["Set-Cookie"]
    assert cookie.startswith("supportrag_session=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    secure = log_in(app_with(runtime, secure_cookies=True).test_client()).headers["Set-Cookie"]
    assert "Secure" in secure and "HttpOnly" in secure


def test_login_form_without_csrf_token_is_refused(app, admin_account):
    response = app.test_client().post("/admin/login", data={"username": ADMIN_USERNAME, "password": ADMIN_PASSWORD})
    assert response.status_code == 403
    assert "CSRF" in response.get_data(as_text=True)


def test_form_post_without_csrf_token_is_refused_and_changes_nothing(admin_client, client):
    article = new_article(client)
    response = admin_client.post(f"/admin/articles/{article['id']}/delete", data={})
    assert response.status_code == 403
    assert client.get(f"/api/articles/{article['id']}").status_code == 200
    for forged in ("forged", "fälschung"):
        response = admin_client.post(f"/admin/articles/{article['id']}/delete", data={"csrf_token": forged})
        assert response.status_code == 403
    assert client.get(f"/api/articles/{article['id']}").status_code == 200


def test_session_calls_to_the_json_api_need_the_csrf_header(admin_client, client):
    article = new_article(client)
    path = f"/api/articles/{article['id']}"
    assert_error(admin_client.patch(path, json={"importance": 1.8}), 403, "csrf_failed")
    token = csrf_from(admin_client.get("/admin/articles").get_data(as_text=True))
    response = admin_client.patch(path, json={"importance": 1.8}, headers={"X-CSRF-Token": token})
    assert response.status_code == 200
    assert response.get_json()["article"]["importance"] == 1.8


def test_changing_the_password_ends_existing_sessions(admin_client, runtime):
    assert admin_client.get("/admin/articles").status_code == 200
    with runtime.session() as session:
        set_admin_password(session, ADMIN_USERNAME, "a brand new passphrase")
    assert admin_client.get("/admin/articles").status_code == 302


def test_secret_key_is_generated_once_in_app_state_and_shared_by_every_app(runtime, admin_account):
    first, second = create_app({"TESTING": True}, runtime=runtime), create_app({"TESTING": True}, runtime=runtime)
    browser = first.test_client()
    log_in(browser)
    cookie = browser.get_cookie("supportrag_session")
    with runtime.session() as session:
        stored = session.scalar(sa.select(AppState.value).where(AppState.key == SECRET_KEY_STATE))
    assert stored and first.secret_key == stored
    # A second worker with the same database accepts the first one's cookie.
    other = second.test_client()
    other.set_cookie("supportrag_session", cookie.value)
    assert other.get("/admin/articles").status_code == 200
    assert second.secret_key == stored


def test_secret_key_from_the_environment_wins_and_is_not_in_settings_repr(runtime, admin_account):
    app = app_with(runtime, secret_key="from-the-environment-0123456789")
    log_in(app.test_client())
    assert app.secret_key == "from-the-environment-0123456789"
    assert "from-the-environment" not in repr(app.extensions["supportrag"].settings)


# --- the CLI -------------------------------------------------------------------------------------

def test_cli_creates_admins_and_tokens_and_revokes_them(monkeypatch, fresh_database_url, tmp_path):
    from service.cli.main import main

    monkeypatch.setenv("DATABASE_URL", fresh_database_url)
    monkeypatch.setenv("SUPPORTRAG_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    created = runner.invoke(main, ["admin", "create", "--username", "Lead"], input=f"{ADMIN_PASSWORD}\n" * 2)
    assert created.exit_code == 0, created.output
    assert "created admin 'lead'" in created.output
    assert ADMIN_PASSWORD not in created.output
    duplicate = runner.invoke(main, ["admin", "create", "--username", "lead", "--password", ADMIN_PASSWORD])
    assert duplicate.exit_code == 1 and "already exists" in duplicate.output
    weak = runner.invoke(main, ["admin", "create", "--username", "other", "--password", "short"])
    assert weak.exit_code == 1 and "password" in weak.output
    assert "lead" in runner.invoke(main, ["admin", "list"]).output

    made = runner.invoke(main, ["token", "create", "--name", "nightly import"])
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip().splitlines()[-1]
    assert secret.startswith("srt_")
    listing = runner.invoke(main, ["token", "list", "--json"])
    tokens = json.loads(listing.stdout)
    assert [(t["name"], t["revoked_at"]) for t in tokens] == [("nightly import", None)]
    assert secret not in listing.output
    revoked = runner.invoke(main, ["token", "revoke", str(tokens[0]["id"])])
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    assert "revoked" in runner.invoke(main, ["token", "list"]).output
    missing = runner.invoke(main, ["token", "revoke", "999999"])
    assert missing.exit_code == 1 and "no token with id 999999" in missing.output


def test_serve_explains_how_to_create_the_first_admin_only_while_there_is_none(runtime, capsys):
    from service.web.serving import _explain_admin_setup

    _explain_admin_setup(runtime)
    assert "supportrag admin create --username NAME'" in capsys.readouterr().out
    with runtime.session() as session:
        create_admin(session, ADMIN_USERNAME, ADMIN_PASSWORD)
    _explain_admin_setup(runtime)
    assert capsys.readouterr().out == ""
