"""Issue 16 on a real ``supportrag serve`` (gunicorn, one worker): its access log, its own error answers, start-up."""

from __future__ import annotations

import http.cookiejar
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from service.db.engine import create_engine
from service.db.migrate import upgrade_database
from service.db.models import Ticket

from .admin_helpers import csrf_from
from .conftest import admin_conninfo
from .test_serve import SUPPORTRAG, running_server


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """Return 30x responses as they are, so a test sees each Location."""

    def redirect_request(self, *args, **kwargs):
        return None


STUCK_SUBJECT = "I forgot my password (asked just before a worker was killed)"


def leave_a_stuck_ticket(url: str) -> None:
    """Migrate the new database (if not yet) and leave in it what a worker killed mid-answer leaves: a ticket
    'received'."""
    engine = create_engine(url, pool_size=1)
    try:
        upgrade_database(engine)
        with engine.begin() as conn:
            conn.execute(sa.insert(Ticket).values(subject=STUCK_SUBJECT, body=STUCK_SUBJECT, status="received",
                                                  created_at=sa.func.now() - timedelta(hours=1)))
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def served(pg_url, served_template, tmp_path_factory) -> Iterator[tuple[str, Path, str]]:
    """One gunicorn worker on its own new database (a copy of the migrated, seeded template): (base URL, its log
    file, the database URL)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{served_template}"')
    data_dir = tmp_path_factory.mktemp("served")
    url = sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    leave_a_stuck_ticket(url)
    try:
        with running_server("--workers", "1", "--threads", "4", database_url=url, data_dir=data_dir) as (base, _):
            yield base, data_dir / "server.log", url
    finally:
        with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def browser() -> urllib.request.OpenerDirector:
    """A cookie-keeping client that does not follow redirects."""
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirects)


def open_url(opener, url: str, form: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """GET, or POST a form; (status, headers, body) whatever the status, the response closed."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        response = opener.open(urllib.request.Request(url, data=data), timeout=60)
    except urllib.error.HTTPError as error:
        response = error
    with response:
        return response.status, dict(response.headers), response.read().decode(errors="replace")


def raw_request(base_url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are (no client library would send these) and read the whole answer."""
    host, port = urllib.parse.urlsplit(base_url).hostname, urllib.parse.urlsplit(base_url).port
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


def test_item_1_ticket_secrets_never_reach_the_serve_access_log(served):
    base_url, log_path, _ = served
    customer = browser()
    token = csrf_from(open_url(customer, f"{base_url}/help")[2])
    status, headers, _ = open_url(customer, f"{base_url}/help/ask",
                                  {"csrf_token": token, "description": "I forgot my password"})
    assert status == 303
    location = headers["Location"]
    assert re.fullmatch(r"/help/tickets/\d+", location)  # a clean URL
    assert open_url(customer, base_url + location)[0] == 200  # the cookie opens it
    jar = next(h.cookiejar for h in customer.handlers if isinstance(h, urllib.request.HTTPCookieProcessor))
    secret = next(cookie.value for cookie in jar if cookie.name.startswith("ticket_"))
    # An old-style link is exchanged once for the cookie and a clean URL; it works in another browser.
    other = browser()
    status, headers, _ = open_url(other, f"{base_url}{location}?key={secret}")
    assert (status, headers["Location"]) == (303, location)
    assert open_url(other, base_url + location)[0] == 200
    assert open_url(browser(), base_url + location)[0] == 404  # no cookie, no ticket
    time.sleep(0.5)  # the access log is written after the response
    log = log_path.read_text(errors="replace")
    assert f"GET {location} HTTP/1.1\" 200" in log
    assert secret not in log


def test_item_10_requests_gunicorn_cannot_parse_get_the_json_error_shape(served):
    base_url, _, _ = served
    control = raw_request(base_url, b"GET /api/articles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x01b\r\n\r\n")
    long_url = raw_request(base_url, b"GET /api/articles?q=" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    for (status, headers, body), expected in ((control, 400), (long_url, 414)):
        assert status == expected
        assert headers["content-type"] == "application/json"
        error = json.loads(body)["error"]
        assert set(error) == {"code", "message", "details"} and error["details"] == {}
        assert "a\x01b" not in error["message"]


def test_item_10_the_worker_loads_the_model_before_its_first_request(served):
    _, log_path, _ = served
    log = log_path.read_text(errors="replace")
    ready = re.search(r"worker \d+ ready: local embedding model loaded", log)
    first_request = re.search(r'"(GET|POST) /', log)  # /healthz, polled from the start
    assert ready and first_request and ready.start() < first_request.start()


def test_newcomer_serve_names_the_help_center_and_admin_and_a_hint_that_needs_no_venv_on_path(served):
    _, log_path, _ = served
    log = log_path.read_text(errors="replace")
    assert "help center: /help" in log and "admin: /admin" in log
    assert f"'{SUPPORTRAG} admin create --username NAME'" in log


def stuck_ticket_status(url: str, timeout: float = 60) -> str | None:
    """The stuck ticket's status once recovery has moved it off ``received`` (or when ``timeout`` runs out)."""
    engine = create_engine(url, pool_size=1)
    try:
        deadline = time.monotonic() + timeout
        while True:
            with engine.connect() as conn:
                status = conn.scalar(sa.select(Ticket.status).where(Ticket.subject == STUCK_SUBJECT))
            if status != "received" or time.monotonic() >= deadline:
                return status
            time.sleep(0.5)
    finally:
        engine.dispose()


def test_item_9_serve_answers_a_ticket_a_dead_worker_left_received(served):
    _, _, url = served
    assert stuck_ticket_status(url) == "answered"


def test_issue_33_serve_dev_runs_recovery_too(migrated_database_url, tmp_path):
    leave_a_stuck_ticket(migrated_database_url)
    with running_server("--dev", database_url=migrated_database_url, data_dir=tmp_path):
        assert stuck_ticket_status(migrated_database_url) == "answered"
