"""Issue 33: reading a ticket's draft never writes; ``POST /api/tickets/<id>/draft`` makes (or remakes) it."""

from __future__ import annotations

import sqlalchemy as sa

from service.accounts import create_admin
from service.db.models import TicketDraft

from .admin_helpers import csrf_from, log_in
from .helpers import assert_error

VAT = "My invoice shows the wrong VAT number for my company"


def _ticket(client) -> tuple[int, str]:
    response = client.post("/api/tickets", json={"subject": "VAT", "body": VAT, "email": "bo@example.com"})
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["ticket"]["id"], response.get_json()["secret"]


def _draft_rows(session, ticket_id: int) -> int:
    session.expire_all()
    return session.scalar(sa.select(sa.func.count()).select_from(TicketDraft)
                          .where(TicketDraft.ticket_id == ticket_id))


def test_get_twice_writes_no_row_and_answers_404_until_a_post_makes_one(seeded, client, session):
    ticket_id, _ = _ticket(client)
    before = _draft_rows(session, ticket_id)
    for _ in range(2):
        error = assert_error(client.get(f"/api/tickets/{ticket_id}/draft"), 404, "not_found")
        assert "POST" in error["message"]
    assert _draft_rows(session, ticket_id) == before == 0
    made = client.post(f"/api/tickets/{ticket_id}/draft")
    assert made.status_code == 201 and made.headers["Location"].endswith(f"/api/tickets/{ticket_id}/draft")
    assert _draft_rows(session, ticket_id) == 1
    for _ in range(2):
        read = client.get(f"/api/tickets/{ticket_id}/draft")
        assert read.status_code == 200 and read.get_json() == made.get_json()
    assert _draft_rows(session, ticket_id) == 1
    remade = client.post(f"/api/tickets/{ticket_id}/draft", json={})
    assert remade.status_code == 201 and remade.get_json()["id"] > made.get_json()["id"]
    assert _draft_rows(session, ticket_id) == 2
    assert client.get(f"/api/tickets/{ticket_id}/draft").get_json()["id"] == remade.get_json()["id"]


def test_a_used_draft_is_no_longer_the_current_one(seeded, client):
    ticket_id, _ = _ticket(client)
    draft = client.post(f"/api/tickets/{ticket_id}/draft").get_json()
    assert client.post(f"/api/tickets/{ticket_id}/replies", json={"body": draft["draft"]}).status_code == 201
    assert_error(client.get(f"/api/tickets/{ticket_id}/draft"), 404, "not_found")


def test_post_refuses_bad_bodies_and_unknown_tickets_in_the_error_shape(seeded, client, session):
    ticket_id, _ = _ticket(client)
    assert_error(client.post(f"/api/tickets/{ticket_id}/draft", json={"tone": "warm"}), 400, "validation_error")
    assert_error(client.post(f"/api/tickets/{ticket_id}/draft", json={"instruction": "x" * 501}),
                 400, "validation_error")
    assert_error(client.post(f"/api/tickets/{ticket_id}/draft", data="shorter", content_type="text/plain"),
                 415, "unsupported_media_type")
    assert_error(client.get(f"/api/tickets/{ticket_id}/draft?instruction=shorter"), 400, "validation_error")
    assert _draft_rows(session, ticket_id) == 0
    assert_error(client.get("/api/tickets/999999/draft"), 404, "not_found")
    assert_error(client.post("/api/tickets/999999/draft"), 404, "not_found")


def test_customers_cannot_read_or_make_drafts_and_agents_need_the_csrf_token(seeded, app, runtime, client,
                                                                            anonymous_client, session):
    ticket_id, secret = _ticket(client)
    headers = {"X-Ticket-Secret": secret}
    assert_error(anonymous_client.get(f"/api/tickets/{ticket_id}/draft", headers=headers), 401, "unauthorized")
    assert_error(anonymous_client.post(f"/api/tickets/{ticket_id}/draft", headers=headers), 401, "unauthorized")
    assert _draft_rows(session, ticket_id) == 0
    with runtime.session() as writing:
        create_admin(writing, "agnes", "agent-password-1", role="agent")
    agent = app.test_client()
    assert log_in(agent, "agnes", "agent-password-1").status_code == 302
    assert_error(agent.post(f"/api/tickets/{ticket_id}/draft"), 403, "csrf_failed")
    assert _draft_rows(session, ticket_id) == 0
    token = csrf_from(agent.get("/admin/inbox").get_data(as_text=True))
    made = agent.post(f"/api/tickets/{ticket_id}/draft", headers={"X-CSRF-Token": token})
    assert made.status_code == 201 and _draft_rows(session, ticket_id) == 1
    assert agent.get(f"/api/tickets/{ticket_id}/draft").get_json()["id"] == made.get_json()["id"]


def test_the_spec_documents_a_read_only_get_and_a_post_that_makes_the_draft(client):
    spec = client.get("/api/openapi.json").get_json()["paths"]["/api/tickets/{ticket_id}/draft"]
    assert "instruction" not in [p["name"] for p in spec["get"]["parameters"]] and "requestBody" not in spec["get"]
    assert "201" in spec["post"]["responses"] and spec["post"]["requestBody"]["required"] is False
