"""Issue 33 item 4: ``POST /api/tickets/<id>/replies`` honours ``Idempotency-Key``; the reply form sends one."""

from __future__ import annotations

import dataclasses
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.models import MailOutbox, TicketMessage
from service.runtime import Runtime
from service.web.app import create_app

from .admin_helpers import csrf_from, log_in
from .conftest import bearer_environ
from .helpers import assert_error

HANDED_OFF = "Do you ship parrot food to Mars?"
RACERS = 6


def new_ticket(client) -> int:
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "maria@example.com"})
    assert created.status_code == 201, created.get_data(as_text=True)
    return created.get_json()["ticket"]["id"]


def replies_and_mail(runtime, ticket_id: int) -> tuple[int, int]:
    with runtime.session() as session:
        replies = session.scalar(sa.select(sa.func.count()).select_from(TicketMessage).where(
            TicketMessage.ticket_id == ticket_id, TicketMessage.kind == "agent_reply"))
        mails = session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
            MailOutbox.ticket_id == ticket_id, MailOutbox.auto_submitted.is_(None)))
    return replies, mails


@pytest.fixture
def mailing(seeded):
    """The test runtime with SMTP configured (the outbox rows are counted; nothing is sent)."""
    seeded.settings = dataclasses.replace(seeded.settings, smtp_host="127.0.0.1", smtp_port=1,
                                          mail_from="support@example.com", public_url="https://help.example.com")
    return seeded


def test_the_same_reply_posted_twice_with_one_key_is_one_message(mailing, client):
    ticket_id = new_ticket(client)
    headers = {"Idempotency-Key": "reply-1"}
    first = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"}, headers=headers)
    again = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"}, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.get_json() == first.get_json() and again.headers["Idempotent-Replayed"] == "true"
    assert replies_and_mail(mailing, ticket_id) == (1, 1)
    other = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"},
                        headers={"Idempotency-Key": "reply-2"})
    assert other.status_code == 201 and replies_and_mail(mailing, ticket_id) == (2, 2)


def test_a_key_reused_for_another_body_is_a_409_and_a_bad_key_a_400(mailing, client):
    ticket_id = new_ticket(client)
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "One"}, headers={"Idempotency-Key": "k"})
    assert_error(client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Two"},
                             headers={"Idempotency-Key": "k"}), 409, "idempotency_key_reused")
    assert client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Three"},
                       headers={"Idempotency-Key": "x" * 300}).status_code == 400
    assert client.post("/api/tickets/999999/replies", json={"body": "x"},
                       headers={"Idempotency-Key": "k"}).status_code == 404


def test_a_failed_request_does_not_keep_its_key(mailing, client):
    ticket_id = new_ticket(client)
    assert client.post(f"/api/tickets/{ticket_id}/replies", json={"body": ""},
                       headers={"Idempotency-Key": "retry"}).status_code == 400
    assert client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Now with text"},
                       headers={"Idempotency-Key": "retry"}).status_code == 201


def test_the_reply_form_carries_a_key_and_a_double_submit_sends_once(mailing, app, admin_account):
    browser = app.test_client()
    assert log_in(browser).status_code == 302
    api = app.test_client()
    api.environ_base.update(bearer_environ(mailing))
    ticket_id = new_ticket(api)
    page = browser.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    key = re.search(r'name="idempotency_key" value="([^"]+)"', page).group(1)
    form = {"csrf_token": csrf_from(page), "idempotency_key": key, "body": "We ship to Earth only.",
            "status": "pending"}
    assert browser.post(f"/admin/inbox/{ticket_id}/reply", data=form).status_code == 302
    assert browser.post(f"/admin/inbox/{ticket_id}/reply", data=form).status_code == 302
    assert replies_and_mail(mailing, ticket_id) == (1, 1)


@pytest.fixture
def committed(fresh_database_url, local_embedder, tmp_path):
    """A seeded runtime on its own database whose sessions really commit (each request its own connection)."""
    settings = Settings(database_url=fresh_database_url, data_dir=tmp_path, auto_seed=False, smtp_host="127.0.0.1",
                        mail_from="support@example.com", public_url="https://help.example.com",
                        database_pool_size=RACERS + 2)
    runtime = Runtime.start(settings, seed=False)
    runtime._embedder = local_embedder
    runtime.seed()
    yield runtime
    runtime.close()


def test_racing_duplicates_with_one_key_make_one_message(committed):
    app = create_app({"TESTING": True}, runtime=committed)
    auth = bearer_environ(committed)
    client = app.test_client()
    client.environ_base.update(auth)
    ticket_id = new_ticket(client)
    barrier = threading.Barrier(RACERS)

    def post(_: int):
        racer = app.test_client()
        racer.environ_base.update(auth)
        barrier.wait()
        return racer.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"},
                          headers={"Idempotency-Key": "race"})

    with ThreadPoolExecutor(RACERS) as pool:
        responses = list(pool.map(post, range(RACERS)))
    assert [r.status_code for r in responses] == [201] * RACERS
    assert len({r.get_json()["message"]["id"] for r in responses}) == 1
    assert replies_and_mail(committed, ticket_id) == (1, 1)
