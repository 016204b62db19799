"""The knowledge loop's admin pages in headless Chromium, against a real ``supportrag serve``: approve a
candidate after editing it, and apply an importance proposal. Screenshots as in test_admin_browser."""

from __future__ import annotations

import re

from typing import Any, Iterator

import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.engine import create_engine
from service.knowledge.candidates import propose_candidate
from service.runtime import Runtime

from .test_admin_browser import DESKTOP, USERNAME, create_admin_and_token, log_in, request_json
from .test_serve import serve_fresh_database

REFUND_QUESTIONS = ["How do I get a refund?", "Can I return an item for my money back?",
                    "How long does a refund take?", "What is your refund policy?", "I want to return my order"]
PAYMENT_QUESTIONS = ["Which cards do you accept?", "Can I pay with PayPal?", "Do you take Apple Pay?",
                     "Can I pay cash on delivery?", "Which payment methods can I use?"]
PICKUP_QUESTION = "Can I collect my order in person from your warehouse?"
PICKUP_REPLY = ("Hi Jane, yes! Choose Warehouse pickup as the delivery option at checkout; orders are ready after "
                "2 hours at our Leeds warehouse, Monday to Friday 9:00-17:00. Bring the confirmation email and a "
                "photo ID. Questions? Call me on +44 20 7946 0958.")


@pytest.fixture(scope="module")
def loop_server(pg_url, served_template, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A fresh seeded database served by ``supportrag serve``, with one admin and one API token."""
    data_dir = tmp_path_factory.mktemp("learning-browser")
    def prepare(env: dict[str, str], base_url: str) -> str:
        # The floor gate: the loop learns from close calls between articles (the calibrated gate hands these short
        # questions off; its own choices are tested in tests/test_gate_*).
        env["ANSWER_GATE"] = "floor"
        return create_admin_and_token(env, base_url)

    with serve_fresh_database(pg_url, data_dir, template=served_template, prepare=prepare) as served:
        yield {"base_url": served["base_url"], "token": served["prepared"],
               "database_url": served["database_url"], "data_dir": data_dir}


@pytest.fixture
def page(browser) -> Iterator[Any]:
    """A fresh browser context at desktop size."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def _ask(server: dict[str, Any], question: str, helpful: bool) -> None:
    """A ticket answered by the server, then rated through the feedback API (as an admin)."""
    auth = {"Authorization": f"Bearer {server['token']}"}
    status, created = request_json("POST", f"{server['base_url']}/api/tickets",
                                   {"subject": question, "body": question}, auth)
    assert status == 201 and created["ticket"]["status"] == "answered", created
    status, _ = request_json("POST", f"{server['base_url']}/api/tickets/{created['ticket']['id']}/feedback",
                             {"helpful": helpful}, auth)
    assert status == 201


def _candidate(server: dict[str, Any], local_embedder) -> int:
    """An agent solved a handed-off ticket: the agent side's call, on the server's database."""
    engine = create_engine(server["database_url"], pool_size=1)
    runtime = Runtime(Settings(data_dir=server["data_dir"]), engine, local_embedder)
    try:
        with runtime.session() as session:
            ticket_id = session.execute(sa.text(
                "INSERT INTO tickets (subject, body, status) VALUES (:q, :q, 'needs_agent') RETURNING id"),
                {"q": PICKUP_QUESTION}).scalar_one()
            return propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                     ticket_id=ticket_id, question=PICKUP_QUESTION, reply_bodies=[PICKUP_REPLY]).id
    finally:
        engine.dispose()


def test_admin_approves_an_edited_candidate_and_it_is_searchable(page, loop_server, local_embedder, screenshots):
    base_url = loop_server["base_url"]
    candidate_id = _candidate(loop_server, local_embedder)
    log_in(page, base_url)
    page.get_by_role("link", name="Candidates").click()
    page.wait_for_url(f"{base_url}/admin/candidates")
    card = page.locator(f'[data-candidate-id="{candidate_id}"]')
    assert "[phone]" in card.get_by_label("Body (markdown)").input_value()
    card.get_by_label("Title").fill("Collecting an order from the warehouse")
    body = card.get_by_label("Body (markdown)")
    body.fill(body.input_value().replace("Hi Jane, yes! ", "").split(" Questions?")[0])
    card.get_by_label("Category").fill("Shipping")
    page.screenshot(path=str(screenshots / "admin-candidates.png"), full_page=True)
    card.get_by_role("button", name="Approve as a new article").click()
    page.get_by_text("Published “Collecting an order from the warehouse” (embedded).").wait_for()
    _, found = request_json("POST", f"{base_url}/api/search", {"query": "pick up my order at the warehouse",
                                                               "limit": 1})
    assert found["results"][0]["title"] == "Collecting an order from the warehouse"
    assert found["results"][0]["category"] == "Shipping"


def test_admin_recounts_outcomes_and_applies_a_proposal_after_seeing_the_evidence(page, loop_server, screenshots):
    base_url = loop_server["base_url"]
    for question in REFUND_QUESTIONS:
        _ask(loop_server, question, helpful=True)
    for question in PAYMENT_QUESTIONS:
        _ask(loop_server, question, helpful=False)
    log_in(page, base_url)
    page.get_by_role("link", name="Importance").click()
    page.get_by_role("button", name="Recount outcomes").click()
    page.get_by_text(re.compile(r"Recounted the last 30 days: \d+ articles? with outcomes, 2 proposals pending")).wait_for()
    proposal = page.locator("section.proposal", has_text="How to request a refund")
    assert "1.00 → 1.25" in proposal.locator("h2").text_content()
    assert "5 solved, 0 escalated, 0 not helpful" in proposal.text_content()
    assert proposal.locator(".whatif-table tbody tr").count() == 3
    page.screenshot(path=str(screenshots / "admin-importance.png"), full_page=True)
    proposal.get_by_role("button", name="Apply").click()
    page.get_by_text("Applied: “How to request a refund” importance 1 → 1.25.").wait_for()
    assert page.locator("section.proposal").count() == 1  # the other one is still there, untouched

    page.get_by_role("link", name="How to request a refund").first.click()
    history = page.locator("table.importance-log tbody tr").first
    assert "1.00 → 1.25" in history.text_content() and f"admin:{USERNAME}" in history.text_content()
    assert "proposal" in history.text_content()
    assert page.get_by_label("Importance (0.0 to 2.0)").input_value() == "1.2"  # the slider's 0.1 steps
    page.screenshot(path=str(screenshots / "admin-importance-history.png"), full_page=True)
