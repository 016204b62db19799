"""``supportrag serve`` as a real process on a free port, talked to over HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import psycopg
import pytest
import sqlalchemy as sa

from .conftest import STOPPING, admin_conninfo
from .helpers import ENVIRONMENT_OVERRIDES

SUPPORTRAG = Path(sys.executable).parent / "supportrag"
START_TIMEOUT_SECONDS = 90
STOP_TIMEOUT_SECONDS = 30


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, str], Any]:
    """One HTTP request; returns (status, headers, parsed JSON body) for successes and errors alike."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), json.loads(error.read())


def server_env(database_url: str, data_dir: Path) -> dict[str, str]:
    """The test's environment with its database and data directory, and default settings otherwise."""
    env = {name: value for name, value in os.environ.items() if name not in ENVIRONMENT_OVERRIDES}
    env.update(DATABASE_URL=database_url, SUPPORTRAG_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    return env


def wait_until_healthy(process: subprocess.Popen, base_url: str, log_path: Path) -> None:
    """Poll /healthz until it answers 200; fail with the server's output if it dies or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log_path.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    pytest.fail(f"server not healthy after {START_TIMEOUT_SECONDS}s:\n{log_path.read_text(errors='replace')}")


def stop(process: subprocess.Popen) -> int:
    """SIGTERM, then SIGKILL if it has not exited in time; returns the exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def stop_later(process: subprocess.Popen) -> None:
    """SIGTERM now; conftest's ``stopping_servers`` waits for the exit (or kills) when the test process ends.
    gunicorn takes ~2 s to shut down gracefully, which the next test module need not wait for (tests of the
    shutdown itself call ``stop``)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    STOPPING.append(process)


@contextmanager
def serve_fresh_database(pg_url: str, data_dir: Path, *, template: str | None = None,
                         prepare: Callable[[dict[str, str], str], Any] | None = None) -> Iterator[dict[str, Any]]:
    """A new database on the test server served by ``supportrag serve`` on a free port, until the block ends.

    The database is a copy of ``template`` (conftest's ``served_template``: migrated and seeded once per test
    process), else empty. ``prepare(env, base_url)`` runs first (accounts, tokens, extra settings written into
    ``env``); its result is yielded as ``prepared`` with ``base_url``, ``env`` and ``database_url``. The server is
    told to stop (``stop_later``) and the database dropped whatever happened.
    """
    name = f"t_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        database_url = sa.make_url(pg_url).set(database=name).render_as_string(hide_password=False)
        port, log_path = free_port(), data_dir / "server.log"
        base_url = f"http://127.0.0.1:{port}"
        env = server_env(database_url, data_dir)
        prepared = prepare(env, base_url) if prepare else None
        with open(log_path, "wb") as log:
            process = subprocess.Popen([str(SUPPORTRAG), "serve", "--port", str(port)], env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
        try:
            wait_until_healthy(process, base_url, log_path)
            yield {"base_url": base_url, "env": env, "database_url": database_url, "prepared": prepared}
        finally:
            stop_later(process)
    finally:
        with psycopg.connect(admin_conninfo(pg_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def running_server(*args: str, database_url: str, data_dir: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """``supportrag serve --port N ARGS`` until the block ends (then ``stop_later``); output goes to
    data_dir/server.log."""
    port = free_port()
    log_path = data_dir / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(SUPPORTRAG), "serve", "--port", str(port), *args],
                                   env=server_env(database_url, data_dir), stdout=log, stderr=subprocess.STDOUT)
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_until_healthy(process, base_url, log_path)
        yield base_url, process
    finally:
        stop_later(process)


def assert_error_shape(body: Any, code: str) -> None:
    """The one JSON error shape: {"error": {"code", "message", "details"}}."""
    assert body.keys() == {"error"}
    assert body["error"].keys() == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)


def test_gunicorn_server_seeds_on_first_start_answers_search_and_errors_in_json_then_stops_cleanly(
        fresh_database_url, tmp_path):
    assert SUPPORTRAG.exists(), f"console script not installed at {SUPPORTRAG}"
    with running_server(database_url=fresh_database_url, data_dir=tmp_path) as (base_url, process):
        status, _, health = call("GET", f"{base_url}/healthz")
        assert (status, health) == (200, {"status": "ok", "database": "ok"})

        status, _, stats = call("GET", f"{base_url}/api/stats")
        assert status == 200
        assert (stats["articles"], stats["embedded"], stats["pending"], stats["stale"]) == (5, 5, 0, 0)

        status, _, found = call("POST", f"{base_url}/api/search", {"query": "I forgot my password"})
        assert status == 200
        assert found["results"][0]["title"] == "Reset your password"
        assert len(found["results"]) == 3

        status, headers, missing = call("GET", f"{base_url}/api/no-such-route")
        assert status == 404
        assert headers["Content-Type"].startswith("application/json")
        assert_error_shape(missing, "not_found")

        status, headers, wrong_method = call("GET", f"{base_url}/api/search")
        assert status == 405
        assert headers["Allow"] == "OPTIONS, POST"
        assert_error_shape(wrong_method, "method_not_allowed")

        status, _, invalid = call("POST", f"{base_url}/api/search", {"query": "  "})
        assert status == 400
        assert_error_shape(invalid, "validation_error")
        assert "query" in invalid["error"]["details"]

        assert process.poll() is None
        # gunicorn's master shuts its workers down gracefully on SIGTERM and exits 0.
        assert stop(process) == 0
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "serving on http://127.0.0.1:" in log
    assert "Booting worker" in log


def test_dev_server_serves_the_same_api(fresh_database_url, tmp_path):
    with running_server("--dev", database_url=fresh_database_url, data_dir=tmp_path) as (base_url, _):
        status, _, stats = call("GET", f"{base_url}/api/stats")
        assert (status, stats["articles"], stats["embedded"]) == (200, 5, 5)

        status, _, found = call("POST", f"{base_url}/api/search", {"query": "I forgot my password", "limit": 1})
        assert status == 200
        assert [result["title"] for result in found["results"]] == ["Reset your password"]

        status, _, missing = call("GET", f"{base_url}/nope")
        assert status == 404
        assert_error_shape(missing, "not_found")
