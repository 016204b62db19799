"""Issue 34 in headless Chromium against a real ``supportrag serve``: the review queue marks answers with one key
each, and the AI answers page draws the curve with its operating point."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from .test_admin_browser import DESKTOP, create_admin_and_token, log_in, request_json
from .test_serve import serve_fresh_database

QUESTIONS = ["How do I get a refund?", "Which payment methods do you accept?", "Do you have an iPhone app?",
             "Where are your servers located?"]


def _prepare(env: dict[str, str], base_url: str) -> str:
    env["REVIEW_SAMPLE_RATE"] = "1"  # every ticket in the queue
    return create_admin_and_token(env, base_url)


@pytest.fixture(scope="module")
def gate_server(pg_url, served_template, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A fresh seeded database served by ``supportrag serve``, with an admin, a token and four tickets."""
    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("gate-browser"),
                              template=served_template, prepare=_prepare) as served:
        auth = {"Authorization": f"Bearer {served['prepared']}"}
        ids = []
        for question in QUESTIONS:
            status, created = request_json("POST", f"{served['base_url']}/api/tickets",
                                           {"subject": question, "body": question}, auth)
            assert status == 201, created
            ids.append(created["ticket"]["id"])
        yield {"base_url": served["base_url"], "auth": auth, "ids": ids}


@pytest.fixture
def page(browser) -> Iterator[Any]:
    """A fresh browser context at desktop size."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def test_the_review_queue_marks_right_with_r_and_wrong_with_w_then_the_page_draws_the_curve(page, gate_server,
                                                                                               screenshots):
    base_url, ids = gate_server["base_url"], gate_server["ids"]
    log_in(page, base_url)
    page.get_by_role("link", name="AI answers").click()
    page.wait_for_url(f"{base_url}/admin/ai-answers")
    assert page.locator("#no-curve").is_visible()
    page.locator("#review-queue-link").click()
    page.wait_for_url(f"{base_url}/admin/reviews")
    items = page.locator(".review-item")
    assert items.count() == len(ids)
    first, second = items.nth(0), items.nth(1)
    first.focus()
    page.keyboard.press("r")
    first.locator(".verdict", has_text="Marked right").wait_for()
    page.keyboard.press("w")  # focus moved to the next unreviewed ticket
    second.locator(".verdict", has_text="Marked wrong").wait_for()
    page.screenshot(path=str(screenshots / "gate-review-queue.png"), full_page=True)
    reviewed = {int(first.get_attribute("data-ticket-id")): True, int(second.get_attribute("data-ticket-id")): False}
    status, gate = request_json("GET", f"{base_url}/api/gate", None, gate_server["auth"])
    assert status == 200 and gate["labels"] == 2 and gate["label_sources"]["reviews"] == 2
    page.reload()
    assert page.locator(".review-item").count() == len(ids) - 2
    assert not {int(i.get_attribute("data-ticket-id")) for i in page.locator(".review-item").all()} & set(reviewed)
    page.goto(f"{base_url}/admin/ai-answers")
    assert page.locator("#gate-curve polyline.precision").count() == 1
    assert page.locator("#operating-point").count() == 1
    assert page.locator("#labels-reviews").inner_text() == "2"
    assert page.locator("#gate-source").inner_text() == "default"
    page.get_by_label("Target precision").fill("0.85")
    page.get_by_role("button", name="Refit and choose the threshold").click()
    page.wait_for_url(f"{base_url}/admin/ai-answers")
    assert page.locator("#gate-target").inner_text() == "85.0%"
    assert "more are needed" in page.locator("#labels-heading + table + p").inner_text()
    assert "0 answered as a reviewer marked right" in page.locator("#review-matches").inner_text()
    page.screenshot(path=str(screenshots / "gate-ai-answers.png"), full_page=True)
