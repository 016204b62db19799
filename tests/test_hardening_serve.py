"""Issue 16 on a real ``supportrag serve`` (gunicorn, one worker): its access log, its own error answers, start-up."""

from __future__ import annotations

import http.cookiejar
import json
import re
import socket
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from .admin_helpers import csrf_from
from .conftest import admin_conninfo
from .test_serve import SUPPORTRAG, running_server


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """Return 30x responses as they are, so a test sees each Location."""

    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope="module")
def served(pg_url, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """One gunicorn worker on its own new database: (base URL, its log file)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    data_dir = tmp_path_factory.mktemp("served")
    url = sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    try:
        with running_server("--workers", "1", "--threads", "4", database_url=url, data_dir=data_dir) as (base, _):
            yield base, data_dir / "server.log"
    finally:
        with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def browser() -> urllib.request.OpenerDirector:
    """A cookie-keeping client that does not follow redirects."""
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirects)


def open_url(opener, url: str, form: dict[str, str] | None = None):
    """GET, or POST a form; returns the response whatever its status."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        return opener.open(urllib.request.Request(url, data=data), timeout=60)
    except urllib.error.HTTPError as error:
        return error


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
    base_url, log_path = served
    customer = browser()
    token = csrf_from(open_url(customer, f"{base_url}/help").read().decode())
    asked = open_url(customer, f"{base_url}/help/ask", {"csrf_token": token, "description": "I forgot my password"})
    assert asked.status == 303
    location = asked.headers["Location"]
    assert re.fullmatch(r"/help/tickets/\d+", location)  # a clean URL
    assert open_url(customer, base_url + location).status == 200  # the cookie opens it
    jar = next(h.cookiejar for h in customer.handlers if isinstance(h, urllib.request.HTTPCookieProcessor))
    secret = next(cookie.value for cookie in jar if cookie.name.startswith("ticket_"))
    # An old-style link is exchanged once for the cookie and a clean URL; it works in another browser.
    other = browser()
    exchanged = open_url(other, f"{base_url}{location}?key={secret}")
    assert (exchanged.status, exchanged.headers["Location"]) == (303, location)
    assert open_url(other, base_url + location).status == 200
    assert open_url(browser(), base_url + location).status == 404  # no cookie, no ticket
    time.sleep(0.5)  # the access log is written after the response
    log = log_path.read_text(errors="replace")
    assert f"GET {location} HTTP/1.1\" 200" in log
    assert secret not in log


def test_item_10_requests_gunicorn_cannot_parse_get_the_json_error_shape(served):
    base_url, _ = served
    control = raw_request(base_url, b"GET /api/articles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x01b\r\n\r\n")
    long_url = raw_request(base_url, b"GET /api/articles?q=" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    for (status, headers, body), expected in ((control, 400), (long_url, 414)):
        assert status == expected
        assert headers["content-type"] == "application/json"
        error = json.loads(body)["error"]
        assert set(error) == {"code", "message", "details"} and error["details"] == {}
        assert "a\x01b" not in error["message"]


def test_item_10_the_worker_loads_the_model_before_its_first_request(served):
    _, log_path = served
    log = log_path.read_text(errors="replace")
    ready = re.search(r"worker \d+ ready: local embedding model loaded", log)
    first_request = re.search(r'"(GET|POST) /', log)  # /healthz, polled from the start
    assert ready and first_request and ready.start() < first_request.start()


def test_newcomer_serve_names_the_help_center_and_admin_and_a_hint_that_needs_no_venv_on_path(served):
    _, log_path = served
    log = log_path.read_text(errors="replace")
    assert "help center: /help" in log and "admin: /admin" in log
    assert f"'{SUPPORTRAG} admin create --username NAME'" in log
