"""The agent's side: the state machine, roles, queues, replies and notes, drafts and their edit ratio."""

from __future__ import annotations

import dataclasses


import pytest
import sqlalchemy as sa

from service.accounts import create_admin, create_token
from service.db.models import Ticket, TicketTransition
from service.tickets.drafts import edit_ratio
from service.tickets.states import InvalidTransition, next_state
from service.validation import ValidationError

from .admin_helpers import log_in
from .helpers import assert_error

AGENT, AGENT_PASSWORD = "agnes", "agent-password-1"


@pytest.mark.parametrize("current, event, requested, expected", [
    (None, "escalated", None, "open"),
    ("solved", "escalated", None, "open"),
    ("pending", "customer_follow_up", None, "open"),
    ("solved", "customer_follow_up", None, "open"),
    (None, "customer_solved", None, "solved"),
    ("open", "agent_reply", "pending", "pending"),
    ("open", "agent_reply", "solved", "solved"),
    ("pending", "agent_set_state", "open", "open"),
])
def test_the_state_machine_moves_tickets_as_the_help_desk_expects(current, event, requested, expected):
    assert next_state(current, event, requested) == expected


@pytest.mark.parametrize("current, event, requested, error", [
    ("solved", "customer_solved", None, InvalidTransition),
    ("open", "agent_reply", "closed", ValidationError),
    ("open", "teleport", None, InvalidTransition),
])
def test_the_state_machine_refuses_what_does_not_apply(current, event, requested, error):
    with pytest.raises(error):
        next_state(current, event, requested)


@pytest.mark.parametrize("draft, sent, expected", [
    ("Hello there, reset it in Settings.", "Hello there, reset it in Settings.", 0.0),
    ("Hello there,  reset it in Settings.", "Hello there, reset it in Settings.\n", 0.0),
    ("alpha beta gamma delta", "one two three four", 1.0),
    (None, "anything", None),
])
def test_edit_ratio_is_zero_when_sent_unchanged_and_one_when_replaced(draft, sent, expected):
    assert edit_ratio(draft, sent) == expected


@pytest.fixture
def settings(settings):
    """The floor gate: an agent's reply to a grounded draft; the calibrated gate hands these
    short questions off (its own choices are tested in tests/test_gate_*)."""
    return dataclasses.replace(settings, answer_gate="floor")


def test_a_light_edit_has_a_small_edit_ratio():
    draft = " ".join(f"word{i}" for i in range(40))
    assert 0 < edit_ratio(draft, draft + " Thanks!") < 0.1


@pytest.fixture
def agent_client(app, runtime):
    """A browser-like client logged in as an agent."""
    with runtime.session() as session:
        create_admin(session, AGENT, AGENT_PASSWORD, role="agent")
    client = app.test_client()
    assert log_in(client, AGENT, AGENT_PASSWORD).status_code == 302
    return client


@pytest.fixture
def agent_token_client(app, runtime):
    """A client with an agent API token."""
    with runtime.session() as session:
        _, secret = create_token(session, "helpdesk script", role="agent")
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    return client


def _csrf(client) -> dict[str, str]:
    client.get("/admin/articles")
    with client.session_transaction() as session:
        return {"X-CSRF-Token": session["csrf"]}


def _escalated_ticket(client, seeded_client_body=None) -> int:
    response = client.post("/api/tickets", json=seeded_client_body or {
        "subject": "Parrot food", "body": "Do you ship parrot food to Mars?", "email": "alice@example.com"})
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["ticket"]["id"]


def test_an_agent_token_gets_403_on_article_writes_but_reads_articles_and_works_tickets(seeded, agent_token_client):
    assert agent_token_client.get("/api/articles").status_code == 200
    assert_error(agent_token_client.post("/api/articles", json={"title": "t", "content": "c"}), 403, "forbidden")
    article_id = agent_token_client.get("/api/articles").get_json()["articles"][0]["id"]
    assert_error(agent_token_client.patch(f"/api/articles/{article_id}", json={"title": "x"}), 403, "forbidden")
    assert_error(agent_token_client.delete(f"/api/articles/{article_id}"), 403, "forbidden")
    ticket_id = _escalated_ticket(agent_token_client)
    reply = agent_token_client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "We do not, sorry."})
    assert reply.status_code == 201


def test_an_agent_cannot_use_the_admin_article_pages_or_the_import(seeded, agent_client):
    assert agent_client.get("/admin/articles").status_code == 200  # reading the knowledge base is fine
    assert agent_client.get("/admin/articles/new").status_code == 403
    csrf = _csrf(agent_client)
    article_id = seeded.sessions().execute(sa.text("SELECT min(id) FROM knowledge_base")).scalar_one()
    response = agent_client.post(f"/admin/articles/{article_id}/delete", data={"csrf_token": csrf["X-CSRF-Token"]})
    assert response.status_code == 403
    assert agent_client.get("/admin/import").status_code == 403


def test_token_roles_default_to_admin_and_refuse_unknown_roles(session):
    info, _ = create_token(session, "nightly import")
    assert info.role == "admin"
    with pytest.raises(ValidationError):
        create_token(session, "x", role="root")


def test_a_hand_off_with_an_email_opens_the_ticket_with_a_due_time_and_a_stored_transition(seeded, client, session):
    ticket_id = _escalated_ticket(client)
    ticket = client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]
    assert ticket["status"] == "needs_agent" and ticket["state"] == "open"
    row = session.get(Ticket, ticket_id)
    assert row.due_at is not None and row.opened_at is not None
    transition = session.scalars(sa.select(TicketTransition).where(TicketTransition.ticket_id == ticket_id)).one()
    assert (transition.from_state, transition.to_state, transition.actor) == (None, "open", "system")


def test_an_answered_ticket_stays_out_of_the_queues(seeded, client):
    response = client.post("/api/tickets", json={"subject": "Password reset",
                                                 "body": "How do I reset my password?", "email": "a@example.com"})
    ticket = response.get_json()["ticket"]
    assert ticket["status"] == "answered" and ticket["state"] is None
    for queue in ("open", "unassigned", "pending", "overdue"):
        ids = [t["id"] for t in client.get(f"/api/tickets?queue={queue}").get_json()["tickets"]]
        assert ticket["id"] not in ids


def test_queues_sort_by_due_time_and_assign_to_me_moves_a_ticket_to_mine(seeded, client, agent_client, session):
    first, second = _escalated_ticket(client), _escalated_ticket(client)
    hour = sa.text("'1 hour'::interval")
    session.execute(sa.update(Ticket).where(Ticket.id == first).values(due_at=sa.func.now() + hour))
    session.execute(sa.update(Ticket).where(Ticket.id == second).values(due_at=sa.func.now() - hour))
    session.commit()
    unassigned = client.get("/api/tickets?queue=unassigned").get_json()["tickets"]
    assert [t["id"] for t in unassigned][:2] == [second, first]
    assert [t["id"] for t in client.get("/api/tickets?queue=overdue").get_json()["tickets"]] == [second]
    assert unassigned[0]["overdue"] is True and unassigned[1]["overdue"] is False
    response = agent_client.post(f"/api/tickets/{first}/assign", headers=_csrf(agent_client))
    assert response.status_code == 200 and response.get_json()["ticket"]["assignee"] == AGENT
    assert [t["id"] for t in agent_client.get("/api/tickets?queue=mine").get_json()["tickets"]] == [first]
    assert first not in [t["id"] for t in client.get("/api/tickets?queue=unassigned").get_json()["tickets"]]


def test_a_reply_sets_pending_records_the_draft_and_its_edit_ratio(seeded, client):
    ticket_id = _escalated_ticket(client, {"subject": "Password", "body": "How do I reset my password? "
                                           "The link never arrives.", "email": "alice@example.com"})
    draft = client.post(f"/api/tickets/{ticket_id}/draft").get_json()
    assert draft["citations"] and draft["citations"][0]["url"].startswith("http")
    assert "[1]" in draft["draft"] and draft["citations"][0]["url"] in draft["draft"]
    sent = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": draft["draft"] + "\nThanks!"})
    assert sent.status_code == 201
    message = sent.get_json()["message"]
    assert message["kind"] == "agent_reply" and 0 < message["edit_ratio"] < 0.2
    assert sent.get_json()["state"] == "pending"
    solved = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Closing this.", "status": "solved"})
    assert solved.get_json()["state"] == "solved" and solved.get_json()["message"]["edit_ratio"] is None


def test_a_customer_never_sees_internal_notes(seeded, client, anonymous_client):
    created = client.post("/api/tickets", json={"subject": "Parrots", "body": "Do you ship parrot food to Mars?",
                                                "email": "alice@example.com"}).get_json()
    ticket_id, key = created["ticket"]["id"], created["secret"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "SECRET-NOTE about this customer",
                                                           "internal": True})
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "PUBLIC-REPLY: we ship to Earth only."})
    page = anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True).get_data(as_text=True)
    assert "PUBLIC-REPLY" in page and "SECRET-NOTE" not in page
    kinds = [m["kind"] for m in client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"]]
    assert kinds == ["customer", "internal_note", "agent_reply"]


def test_a_customer_follow_up_on_the_page_reopens_a_pending_ticket(seeded, client, anonymous_client):
    created = client.post("/api/tickets", json={"subject": "Parrots", "body": "Do you ship parrot food to Mars?",
                                                "email": "alice@example.com"}).get_json()
    ticket_id, key = created["ticket"]["id"], created["secret"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet exactly?"})
    anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True)
    with anonymous_client.session_transaction() as browser_session:
        csrf = browser_session["csrf"]
    response = anonymous_client.post(f"/help/tickets/{ticket_id}/reply",
                                     data={"csrf_token": csrf, "key": key, "body": "Mars, the red one."})
    assert response.status_code == 303 and "key=" not in response.headers["Location"]  # no secret in a URL
    assert client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]["state"] == "open"
    page = anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True).get_data(as_text=True)
    assert "Which planet exactly?" in page and "Mars, the red one." in page


def test_a_wrong_key_cannot_post_a_follow_up(seeded, client, anonymous_client):
    ticket_id = _escalated_ticket(client)
    anonymous_client.get("/help")
    with anonymous_client.session_transaction() as browser_session:
        csrf = browser_session["csrf"]
    response = anonymous_client.post(f"/help/tickets/{ticket_id}/reply",
                                     data={"csrf_token": csrf, "key": "guess", "body": "hi"})
    assert response.status_code == 404


def test_replies_refuse_unknown_fields_and_states(seeded, client):
    ticket_id = _escalated_ticket(client)
    error = assert_error(client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "x", "cc": "x"}),
                         400, "validation_error")
    assert set(error["details"]) == {"cc"}
    error = assert_error(client.post(f"/api/tickets/{ticket_id}/replies", json={"body": " ", "status": "closed"}),
                         400, "validation_error")
    assert set(error["details"]) == {"body", "status"}
    assert_error(client.post("/api/tickets/999999/replies", json={"body": "x"}), 404, "not_found")


def test_admin_create_with_the_agent_role_from_the_command_line(cli_env):
    from .helpers import run_cli

    created = run_cli("admin", "create", "--username", "agnes", "--password", AGENT_PASSWORD, "--role", "agent")
    assert "created agent 'agnes'" in created.output
    assert "agent" in run_cli("admin", "list").output
    token = run_cli("token", "create", "--name", "script", "--role", "agent")
    assert token.exit_code == 0 and "agent" in run_cli("token", "list").output


