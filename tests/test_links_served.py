"""Issue 33's held-out items on a real ``serve`` with a real SMTP server: the agent reply's link opens the ticket
with no cookie, a ticket posted with ``Host: evil.example`` gets no link there, one Idempotency-Key is one
message."""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
import urllib.request
from typing import Any, Iterator

import pytest

from .smtp_server import sending_env
from .test_admin_browser import run_cli
from .test_serve import serve_fresh_database

HANDED_OFF = "Do you ship parrot food to Mars?"


@pytest.fixture(scope="module")
def served(pg_url, served_template, tmp_path_factory, smtp) -> Iterator[dict[str, Any]]:
    """A fresh database served with SMTP to ``smtp`` and links to the server itself; an admin token."""
    def prepare(env: dict[str, str], base_url: str) -> str:
        env.update(sending_env(smtp, base_url), WEB_CONCURRENCY="2")
        return run_cli(env, "token", "create", "--name", "held-out").strip().splitlines()[-1]

    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("links-served"),
                              template=served_template, prepare=prepare) as running:
        yield {"base_url": running["base_url"], "token": running["prepared"]}


def request(base_url: str, method: str, path: str, body: dict | None = None, headers: dict | None = None
            ) -> tuple[int, dict[str, str], str]:
    """One request on a fresh connection (no cookie jar), with the Host header as given."""
    parts = urllib.parse.urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = json.dumps(body).encode() if body is not None else None
    connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    try:
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def mails_for(smtp, ticket_id: int, count: int) -> list:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [m for m in smtp.inbox if f"[T-{ticket_id}]" in str(m["Subject"])]
        if len(found) >= count:
            return found
        time.sleep(0.2)
    return [m for m in smtp.inbox if f"[T-{ticket_id}]" in str(m["Subject"])]


def test_held_out_links_and_idempotency_on_a_served_instance(served, smtp):
    base, auth = served["base_url"], {"Authorization": f"Bearer {served['token']}"}
    status, _, body = request(base, "POST", "/api/tickets", {"subject": "Parrot food", "body": HANDED_OFF,
                                                             "email": "maria@example.com"},
                              headers={"Host": "evil.example"})
    assert status == 201, body
    ticket_id = json.loads(body)["ticket"]["id"]
    key = {"Idempotency-Key": "held-out-1"}
    for _ in range(2):
        status, _, body = request(base, "POST", f"/api/tickets/{ticket_id}/replies",
                                  {"body": "We ship to Earth only, sorry."}, headers=auth | key)
        assert status == 201, body
    mails = mails_for(smtp, ticket_id, 2)
    time.sleep(3)  # a second copy of the reply would have arrived by now
    mails = mails_for(smtp, ticket_id, 2)
    assert len(mails) == 2, [m["Subject"] for m in mails]  # the acknowledgement and ONE reply
    assert all("evil.example" not in m.get_content() for m in mails)
    reply = next(m for m in mails if "We ship to Earth only" in m.get_content())
    link = re.search(r"(\S+/help/tickets/\d+\?link=\S+)", reply.get_content()).group(1)
    assert link.startswith(base)
    with urllib.request.urlopen(link, timeout=60) as page:  # no cookie, as on the customer's phone
        assert page.status == 200 and "We ship to Earth only" in page.read().decode()
