"""Issue 16, item 6: the login lockout counts atomically, per (normalised username, client), with a growing wait."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
import sqlalchemy as sa

from service.accounts import create_admin
from service.db.engine import create_engine
from service.db.migrate import upgrade_database
from service.runtime import Runtime
from service.web.app import create_app
from service.web.limits import login_bucket

from .admin_helpers import ADMIN_PASSWORD, ADMIN_USERNAME, csrf_from
from .test_limits import client_at


@pytest.fixture
def lockout(runtime):
    """Limits as shipped for the lockout (5 failures, a 15-minute window); the per-address limit out of the way."""
    runtime.settings = replace(runtime.settings, rate_limit_login=None, login_lockout=(5, 900))
    return runtime


def post_login(client, username: str, password: str):
    """The login form, CSRF token included."""
    token = csrf_from(client.get("/admin/login").get_data(as_text=True))
    return client.post("/admin/login", data={"csrf_token": token, "username": username, "password": password})


def test_item_6_simultaneous_wrong_logins_are_checked_no_more_than_the_limit(fresh_database_url, settings,
                                                                               local_embedder):
    engine = create_engine(fresh_database_url, pool_size=12)
    try:
        upgrade_database(engine)
        runtime = Runtime(replace(settings, rate_limit_login=None, login_lockout=(5, 900)), engine, local_embedder)
        with runtime.session() as session:
            create_admin(session, ADMIN_USERNAME, ADMIN_PASSWORD)
        app = create_app({"TESTING": True}, runtime=runtime)
        clients = [app.test_client() for _ in range(10)]
        tokens = [csrf_from(c.get("/admin/login").get_data(as_text=True)) for c in clients]
        start, statuses = threading.Barrier(len(clients)), []

        def attempt(client, token) -> None:
            start.wait()
            response = client.post("/admin/login", data={"csrf_token": token, "username": ADMIN_USERNAME,
                                                         "password": "not the password"})
            statuses.append(response.status_code)

        threads = [threading.Thread(target=attempt, args=pair) for pair in zip(clients, tokens)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # 401: checked against the password and wrong; 429: refused before any check.
        assert sorted(statuses) == [401] * 5 + [429] * 5
    finally:
        engine.dispose()


def test_item_6_spelling_a_username_five_ways_locks_only_the_client_that_did_it(lockout, admin_account):
    attacker, admin = client_at(lockout, "198.51.100.66"), client_at(lockout, "203.0.113.40")
    spellings = ["LEAD", " lead", "lEaD", "lead ", "Lead"]
    assert [post_login(attacker, name, "wrong password!").status_code for name in spellings] == [401] * 5
    assert post_login(attacker, ADMIN_USERNAME, ADMIN_PASSWORD).status_code == 429  # that client waits
    assert post_login(admin, ADMIN_USERNAME, ADMIN_PASSWORD).status_code == 302  # the admin does not


def test_item_6_the_wait_doubles_with_each_failure_after_the_limit(lockout, admin_account, runtime):
    client = client_at(lockout, "198.51.100.67")
    for _ in range(5):
        post_login(client, ADMIN_USERNAME, "wrong password!")
    first = post_login(client, ADMIN_USERNAME, ADMIN_PASSWORD)
    assert first.status_code == 429 and 890 <= int(first.headers["Retry-After"]) <= 900
    with runtime.session() as session:  # the wait runs out
        session.execute(sa.text("UPDATE login_throttles SET locked_until = clock_timestamp()"))
    assert post_login(client, ADMIN_USERNAME, "wrong password!").status_code == 401  # checked: the 6th failure
    second = post_login(client, ADMIN_USERNAME, ADMIN_PASSWORD)
    assert second.status_code == 429 and 1790 <= int(second.headers["Retry-After"]) <= 1800


def test_item_6_a_successful_login_forgets_the_failures(lockout, admin_account, runtime):
    client = client_at(lockout, "198.51.100.68")
    for _ in range(4):
        post_login(client, ADMIN_USERNAME, "wrong password!")
    assert post_login(client, ADMIN_USERNAME, ADMIN_PASSWORD).status_code == 302
    with runtime.session() as session:
        assert session.execute(sa.text("SELECT count(*) FROM login_throttles WHERE bucket = :b"),
                               {"b": login_bucket(ADMIN_USERNAME, "198.51.100.68")}).scalar_one() == 0


@pytest.mark.parametrize("spelling", ["LEAD", " lead ", "ｌｅａｄ", "Lead"])
def test_item_6_the_throttle_key_normalises_the_username(spelling):
    assert login_bucket(spelling, "192.0.2.1") == login_bucket("lead", "192.0.2.1")
    assert login_bucket(spelling, "192.0.2.1") != login_bucket("lead", "192.0.2.2")
