"""Abuse limits: feedback only from the ticket's submitter or an admin; rate limits; login lockout; headers."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import assert_error

TICKET = {"subject": "Refund", "body": "I want a refund for my order"}


def submit(client) -> dict[str, Any]:
    """POST a ticket; return the 201 body (ticket and secret)."""
    response = client.post("/api/tickets", json=TICKET)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()


def test_feedback_needs_the_tickets_secret_unless_an_admin_sends_it(seeded, anonymous_client, client):
    created = submit(anonymous_client)
    ticket_id, secret = created["ticket"]["id"], created["secret"]
    url = f"/api/tickets/{ticket_id}/feedback"

    assert_error(anonymous_client.post(url, json={"helpful": False}), 403, "forbidden")
    assert_error(anonymous_client.post(url, json={"helpful": False}, headers={"X-Ticket-Secret": "guess"}),
                 403, "forbidden")
    other = submit(anonymous_client)["secret"]  # another ticket's secret proves nothing here
    assert_error(anonymous_client.post(url, json={"helpful": False}, headers={"X-Ticket-Secret": other}),
                 403, "forbidden")
    assert client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]["feedback"] == []

    assert anonymous_client.post(url, json={"helpful": True}, headers={"X-Ticket-Secret": secret}).status_code == 201
    assert client.post(url, json={"helpful": False, "comment": "agent note"}).status_code == 201
    assert [f["helpful"] for f in client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]["feedback"]] == [
        True, False]


def test_feedback_on_a_missing_ticket_is_404_even_without_a_secret(seeded, anonymous_client):
    assert_error(anonymous_client.post("/api/tickets/999999/feedback", json={"helpful": True}), 404, "not_found")
