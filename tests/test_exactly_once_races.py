"""Issue 33 items 4 and 6 under real concurrency (each request its own connection): bulk actions lock in id order,
tag writes are upserts, escalate decides "first time" under the row lock, and every solve path learns."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.models import ArticleCandidate, MailOutbox, TicketTag, TicketTransition, ticket_vectors
from service.runtime import Runtime
from service.web.app import create_app

from .conftest import bearer_environ

HANDED_OFF = "Do you ship parrot food to Mars?"
ANSWERED = "How do I reset my password?"


@pytest.fixture
def committed(fresh_database_url, local_embedder, tmp_path):
    """A seeded runtime on its own database whose sessions really commit, with SMTP configured (rows only)."""
    settings = Settings(database_url=fresh_database_url, data_dir=tmp_path, auto_seed=False, smtp_host="127.0.0.1",
                        mail_from="support@example.com", public_url="https://help.example.com",
                        database_pool_size=12)
    runtime = Runtime.start(settings, seed=False)
    runtime._embedder = local_embedder
    runtime.seed()
    yield runtime
    runtime.close()


def racing(count: int, work) -> list:
    barrier = threading.Barrier(count)

    def run(i: int):
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def api(app, runtime):
    client = app.test_client()
    client.environ_base.update(bearer_environ(runtime))
    return client


def new_ticket(client, body: str = HANDED_OFF, email: str | None = "maria@example.com") -> tuple[int, str]:
    fields = {"subject": "Question", "body": body} | ({"email": email} if email else {})
    created = client.post("/api/tickets", json=fields).get_json()
    return created["ticket"]["id"], created["secret"]


def test_bulk_solves_in_opposite_orders_neither_deadlock_nor_solve_twice(committed):
    app = create_app({"TESTING": True}, runtime=committed)
    client = api(app, committed)
    ids = [new_ticket(client)[0] for _ in range(6)]
    orders = [ids, list(reversed(ids))] * 3

    def bulk(i: int):
        return api(app, committed).post("/api/tickets/bulk", json={"ids": orders[i], "action": "solve"})

    responses = racing(len(orders), bulk)
    assert [r.status_code for r in responses] == [200] * len(orders)
    assert sorted(i for r in responses for i in r.get_json()["changed"]) == sorted(ids)  # each solved once
    with committed.session() as session:
        to_solved = session.scalar(sa.select(sa.func.count()).select_from(TicketTransition).where(
            TicketTransition.ticket_id.in_(ids), TicketTransition.to_state == "solved"))
    assert to_solved == len(ids)


def test_concurrent_tag_edits_never_fail(committed):
    app = create_app({"TESTING": True}, runtime=committed)
    ticket_id = new_ticket(api(app, committed))[0]
    responses = racing(12, lambda i: api(app, committed).post(
        f"/api/tickets/{ticket_id}/tags", json={"tags": ["billing", "urgent", f"t{i % 3}"]}))
    assert [r.status_code for r in responses] == [200] * 12
    with committed.session() as session:
        tags = set(session.scalars(sa.select(TicketTag.tag).where(TicketTag.ticket_id == ticket_id)))
    assert {"billing", "urgent"} <= tags and len(tags) == 3


def test_racing_escalations_send_one_acknowledgement(committed):
    app = create_app({"TESTING": True}, runtime=committed)
    ticket_id, secret = new_ticket(api(app, committed), body=ANSWERED, email=None)

    def escalate(i: int):
        client = app.test_client()
        client.get(f"/help/tickets/{ticket_id}?key={secret}")
        page = client.get(f"/help/tickets/{ticket_id}").get_data(as_text=True)
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        return client.post(f"/help/tickets/{ticket_id}/escalate",
                           data={"csrf_token": csrf, "email": "maria@example.com"})

    responses = racing(6, escalate)
    assert [r.status_code for r in responses] == [303] * 6
    with committed.session() as session:
        acks = session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
            MailOutbox.ticket_id == ticket_id, MailOutbox.auto_submitted.is_not(None)))
    assert acks == 1


def test_a_bulk_solve_and_a_customer_solve_learn_like_a_reply(committed):
    app = create_app({"TESTING": True}, runtime=committed)
    client = api(app, committed)
    by_agent = new_ticket(client)[0]
    client.post(f"/api/tickets/{by_agent}/replies", json={"body": "We ship parrot food to Earth only, sorry."})
    assert client.post("/api/tickets/bulk", json={"ids": [by_agent], "action": "solve"}).status_code == 200
    by_customer, secret = new_ticket(client, body=ANSWERED, email=None)
    customer = app.test_client()
    customer.get(f"/help/tickets/{by_customer}?key={secret}")
    page = customer.get(f"/help/tickets/{by_customer}").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert customer.post(f"/help/tickets/{by_customer}/solved", data={"csrf_token": csrf}).status_code == 303
    with committed.session() as session:
        assert session.scalar(sa.select(ArticleCandidate.id).where(ArticleCandidate.ticket_id == by_agent))
        solved = set(session.scalars(sa.select(ticket_vectors.c.ticket_id)
                                     .where(ticket_vectors.c.solved_at.is_not(None))))
        assert {by_agent, by_customer} <= solved


def test_the_bm25_recount_takes_the_writers_lock_order(committed):
    with committed.session() as session:
        body = session.scalar(sa.text("SELECT pg_get_functiondef('bm25_recount()'::regprocedure)"))
        writer = session.scalar(sa.text("SELECT pg_get_functiondef('bm25_apply(tsvector[], integer[], integer[])'"
                                        "::regprocedure)"))
    for function in (body, writer):  # the totals row, then the terms
        assert function.index("FROM bm25_totals WHERE id = 1 FOR UPDATE") < function.index("bm25_terms")
    with committed.session() as session:
        before = session.execute(sa.text("SELECT units, total_length FROM bm25_totals")).one()
        session.execute(sa.text("SELECT bm25_recount()"))
        assert session.execute(sa.text("SELECT units, total_length FROM bm25_totals")).one() == before
