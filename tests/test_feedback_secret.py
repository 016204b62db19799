"""Issue 33 item 7: feedback on an answer needs the ticket's secret for agents too (only admins are trusted)."""

from __future__ import annotations

from service.accounts import create_admin

from .admin_helpers import ADMIN_PASSWORD, api_session


def agent_client(app, runtime):
    with runtime.session() as session:
        create_admin(session, "agnes", ADMIN_PASSWORD, role="agent", display_name="Agnes")
    return api_session(app.test_client(), "agnes")


def test_an_agent_needs_the_ticket_secret_to_post_feedback(seeded, app, client):
    created = client.post("/api/tickets", json={"subject": "Password", "body": "How do I reset my password?"})
    ticket_id, secret = created.get_json()["ticket"]["id"], created.get_json()["secret"]
    agent = agent_client(app, seeded)
    refused = agent.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": True})
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "forbidden"
    accepted = agent.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": True},
                          headers={"X-Ticket-Secret": secret})
    assert accepted.status_code == 201
    assert client.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": False}).status_code == 201  # admin
