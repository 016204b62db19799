"""Issue 33 item 3 end to end: candidates and similar-ticket replies shown to agents carry no one's personal data."""

from __future__ import annotations

import dataclasses
import time
from email.message import EmailMessage

import pytest

from service.accounts import create_admin
from service.intake.signature import sign

from .admin_helpers import ADMIN_PASSWORD, api_session

SECRET = "inbound-test-secret"
QUESTION = ("Hi, Maria here. I was charged twice on my card ending 4242 for my parrot food subscription.\n"
            "Can you refund one of the charges?\nMaria Lopez")
ANSWER = ("Hi Maria,\n\nsorry about that! I refunded the duplicate parrot food charge on your card ending 4242; "
          "refunds take 3-5 business days to appear.\n\nBest,\nAgnes")
PERSONAL = ("maria", "lopez", "4242", "agnes")


@pytest.fixture
def inbound(seeded):
    """The test runtime with the inbound e-mail webhook on."""
    seeded.settings = dataclasses.replace(seeded.settings, inbound_email_secret=SECRET)
    return seeded


@pytest.fixture
def agnes(app, runtime):
    """An agent whose display name is Agnes, logged in."""
    with runtime.session() as session:
        create_admin(session, "agnes", ADMIN_PASSWORD, role="agent", display_name="Agnes")
    return api_session(app.test_client(), "agnes")


def leaked(text: str) -> list[str]:
    return [word for word in PERSONAL if word in text.lower()]


def candidate_of(client, ticket_id: int) -> dict:
    found = [c for c in client.get("/api/article-candidates").get_json()["candidates"] if c["ticket_id"] == ticket_id]
    assert len(found) == 1
    return found[0]


def solve(client, ticket_id: int, body: str = ANSWER) -> None:
    response = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": body, "status": "solved"})
    assert response.status_code == 201, response.get_data(as_text=True)


def test_the_maria_candidate_has_no_name_card_or_agent(seeded, client):
    created = client.post("/api/tickets", json={"subject": "Charged twice", "body": QUESTION,
                                                "email": "maria@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    solve(client, ticket_id)
    candidate = candidate_of(client, ticket_id)
    assert leaked(candidate["title"]) == [] and leaked(candidate["body"]) == []
    assert "refunded the duplicate parrot food charge" in candidate["body"]


def test_names_known_only_from_the_e_mail_and_the_agent_are_scrubbed(inbound, client, agnes):
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = ("Maria Lopez <ml@example.com>", "support@example.com",
                                                         "Charged twice")
    message["Message-ID"] = "<maria1@customer.test>"
    message.set_content("I was charged twice for parrot food on the card ending 4242. Lopez household.")
    raw = bytes(message)
    stored = client.post("/api/inbound/email", data=raw, headers={
        "X-Signature": sign(SECRET, raw, int(time.time())), "Content-Type": "message/rfc822"})
    ticket_id = stored.get_json()["outcome"]["ticket_id"]
    # No greeting and no sign-off to give the names away: only the From header and the agent's account know them.
    solve(agnes, ticket_id, "Maria, the duplicate parrot food charge is refunded. Agnes will follow up.")
    candidate = candidate_of(client, ticket_id)
    assert leaked(candidate["title"] + candidate["body"]) == []


def test_similar_ticket_replies_shown_to_agents_are_scrubbed(seeded, client):
    first = client.post("/api/tickets", json={"subject": "Charged twice", "body": QUESTION,
                                              "email": "maria@example.com"}).get_json()["ticket"]["id"]
    solve(client, first)
    second = client.post("/api/tickets", json={"subject": "Double charge",
                                               "body": "I was charged twice for my parrot food subscription.",
                                               "email": "bob@example.com"}).get_json()["ticket"]["id"]
    similar = client.get(f"/api/tickets/{second}/similar").get_json()["tickets"]
    shown = [t for t in similar if t["ticket_id"] == first]
    assert shown, similar
    assert [leaked(str(t)) for t in shown] == [[]]


def test_a_draft_never_carries_another_customers_reply_unscrubbed(seeded, client):
    question = ("Hi, Maria here. Do you ship parrot food to Mars? My card ending 4242 was charged for shipping.\n"
                "Maria Lopez")
    answer = ("Hi Maria,\n\nwe only ship parrot food to addresses on Earth, so I refunded the shipping charge on "
              "your card ending 4242.\n\nBest,\nAgnes")
    first = client.post("/api/tickets", json={"subject": "Parrot food to Mars", "body": question,
                                              "email": "maria@example.com"}).get_json()["ticket"]["id"]
    solve(client, first, answer)
    second = client.post("/api/tickets", json={"subject": "Mars delivery",
                                               "body": "Can you ship parrot food to Mars?",
                                               "email": "bob@example.com"}).get_json()["ticket"]["id"]
    draft = client.post(f"/api/tickets/{second}/draft").get_json()
    assert "only ship parrot food to addresses on Earth" in draft["draft"], draft["draft"]
    assert f"T-{first}" in draft["draft"]  # marked as coming from that ticket
    assert leaked(draft["draft"]) == []
