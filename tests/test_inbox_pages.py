"""The agent inbox pages, canned replies and the dashboard's Drafts panel, through the test client."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.accounts import create_admin
from service.config import Settings
from service.providers.llm import OpenAIChatModel
from service.tickets.canned import add_canned, fill_placeholders

from .admin_helpers import csrf_from, log_in

AGENT, AGENT_PASSWORD = "agnes", "agent-password-1"


@pytest.fixture
def agent(app, runtime):
    """A browser-like client logged in as an agent."""
    with runtime.session() as session:
        create_admin(session, AGENT, AGENT_PASSWORD, role="agent")
    client = app.test_client()
    assert log_in(client, AGENT, AGENT_PASSWORD).status_code == 302
    return client


def _open_ticket(client, body="How do I reset my password? The link never arrives.") -> int:
    created = client.post("/api/tickets", json={"subject": "Password help", "body": body,
                                                "email": "alice@example.com"}).get_json()
    client.post(f"/api/tickets/{created['ticket']['id']}/replies",
                json={"body": "Looking into it.", "internal": True, "status": "open"})
    return created["ticket"]["id"]


def _form(client, path: str) -> str:
    return csrf_from(client.get(path).get_data(as_text=True))


def test_an_agent_assigns_edits_the_draft_sends_and_solves_in_one_action(seeded, client, agent):
    ticket_id = _open_ticket(client)
    queue = agent.get("/admin/inbox?queue=unassigned").get_data(as_text=True)
    assert f"T-{ticket_id} Password help" in queue
    token = _form(agent, f"/admin/inbox/{ticket_id}")
    assert agent.post(f"/admin/inbox/{ticket_id}/assign", data={"csrf_token": token}).status_code == 302
    assert f"T-{ticket_id}" in agent.get("/admin/inbox?queue=mine").get_data(as_text=True)
    page = agent.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    draft = re.search(r'<textarea id="reply-body"[^>]*>(.*?)</textarea>', page, re.S).group(1)
    # The customer already got the "Reset your password" answer: the draft never offers it again (issue 34).
    assert draft.startswith("Hello,") and "Reset your password" not in draft
    assert "Regenerate" not in page  # no language model configured
    response = agent.post(f"/admin/inbox/{ticket_id}/reply", data={
        "csrf_token": token, "body": draft.replace("&#34;", '"').replace("&#39;", "'") + "\nHope this helps!",
        "status": "solved"})
    assert response.status_code == 302
    ticket = client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]
    assert ticket["state"] == "solved"
    reply = client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"][-1]
    assert reply["author"] == AGENT and reply["kind"] == "agent_reply" and reply["edit_ratio"] < 0.2
    panel = agent.get("/admin/dashboard").get_data(as_text=True)
    assert re.search(r'id="drafts-edited">1<', panel) and re.search(r'id="solved-by-agent">1<', panel)


def test_regenerate_with_an_instruction_is_offered_only_with_a_language_model(seeded, client, agent, fake_openai,
                                                                              tmp_path):
    fake_openai.state.chat_reply = "Use the Forgot password link [1]; it is valid for 60 minutes."
    chat = OpenAIChatModel(Settings(data_dir=tmp_path, llm_base_url=fake_openai.base_url, llm_api_key="test",
                                    llm_max_retries=0))
    seeded.chat = chat
    try:
        ticket_id = _open_ticket(client)
        page = agent.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
        assert "Regenerate" in page and "valid for 60 minutes" in page
        fake_openai.state.chat_reply = "Shorter: use Forgot password [1]."
        token = csrf_from(page)
        agent.post(f"/admin/inbox/{ticket_id}/draft", data={"csrf_token": token, "instruction": "shorter"})
        assert "Shorter: use Forgot password" in agent.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
        assert "shorter" in fake_openai.chat_requests()[-1]["body"]["messages"][-1]["content"]
    finally:
        chat.client.close()


def test_canned_replies_fill_their_placeholders_and_only_admins_manage_them(seeded, client, agent, session):
    add_canned(session, "Thanks", "Hi {customer_email}, about {ticket_ref}: {unknown} stays.")
    session.commit()
    ticket_id = _open_ticket(client)
    page = agent.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    canned_id = re.search(r'<option value="(\d+)">Thanks</option>', page).group(1)
    filled = agent.get(f"/admin/inbox/{ticket_id}?canned={canned_id}").get_data(as_text=True)
    assert f"Hi alice@example.com, about T-{ticket_id}: {{unknown}} stays." in filled
    token = _form(agent, "/admin/canned")
    assert agent.post("/admin/canned", data={"csrf_token": token, "title": "x", "body": "y"}).status_code == 403


@pytest.mark.parametrize("body, values, expected", [
    ("{ticket_ref}", {"ticket_ref": "T-1"}, "T-1"),
    ("{customer_email} {customer_email}", {"customer_email": "a@b.c"}, "a@b.c a@b.c"),
    ("{0.__class__} {ticket_ref!r}", {"ticket_ref": "T-1"}, "{0.__class__} {ticket_ref!r}"),
])
def test_fill_placeholders_replaces_only_the_known_names(body, values, expected):
    assert fill_placeholders(body, values) == expected


def test_the_admin_navigation_wraps_at_phone_width_instead_of_hiding_links():
    css = (Path(__file__).resolve().parent.parent / "service/web/static/admin.css").read_text(encoding="utf-8")
    phone = css[css.index("@media (max-width: 760px)"):]
    rule = re.search(r"\.topbar nav \{([^}]*)\}", phone).group(1)
    assert "flex-wrap: wrap" in rule and "overflow-x" not in rule


