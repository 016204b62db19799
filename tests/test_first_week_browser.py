"""Issue 37 in headless Chromium against a fresh ``supportrag serve`` branded Tallybook: the help center's brand,
a Markdown table, the rating control, the ticket list and workspace on a phone, the customer page. Screenshots of
each at 1280 and 390 px (docs/screenshots/ with ``SUPPORTRAG_SCREENSHOTS_DIR=docs/screenshots``).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from .test_admin_browser import DESKTOP, PHONE, create_admin_and_token, log_in, request_json
from .test_serve import serve_fresh_database

PRICING = ("Every plan, and how many API requests it allows.\n\n| Plan | Requests per minute | Price |\n"
           "|---|--:|--:|\n| Free | 60 | 0 € |\n| Team | 600 | 29 € |\n| Business | 6,000 | 99 € |\n")


def _prepare(env: dict[str, str], base_url: str) -> str:
    env.update(SUPPORTRAG_BRAND_NAME="Tallybook", SUPPORTRAG_BRAND_COLOR="#0a7d5a")
    return create_admin_and_token(env, base_url)


@pytest.fixture(scope="module")
def served(pg_url, served_template, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A fresh database served by ``supportrag serve`` with SUPPORTRAG_BRAND_NAME=Tallybook; some tickets."""
    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("first-week"),
                              template=served_template, prepare=_prepare) as server:
        base, auth = server["base_url"], {"Authorization": f"Bearer {server['prepared']}"}
        status, body = request_json("POST", f"{base}/api/articles", {"title": "Plans and limits",
                                                                      "content": PRICING, "category": "Billing"},
                                    auth)
        assert status == 201, body
        tickets = []
        for subject, email in (("Invoice shows the wrong VAT", "maria@acme.example"),
                               ("Second invoice question", "Maria@acme.example"),
                               ("Parrot food to Mars?", "joe@other.example")):
            status, created = request_json("POST", f"{base}/api/tickets",
                                           {"subject": subject, "body": f"{subject} Please help.", "email": email})
            assert status == 201, created
            tickets.append(created["ticket"]["id"])
        yield {"base_url": base, "auth": auth, "article": body["article"]["id"], "tickets": tickets}


def _contexts(browser, storage_state=None):
    """A desktop and a phone context, as (label, context)."""
    return [("", browser.new_context(viewport=DESKTOP, storage_state=storage_state)),
            ("-phone", browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
                                           storage_state=storage_state))]


def _fits_the_width(page, width: int) -> bool:
    return page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_fresh_serve_shows_the_brand_and_the_articles_table(browser, served, screenshots):
    for suffix, context in _contexts(browser):
        try:
            page = context.new_page()
            page.goto(f"{served['base_url']}/help")
            header = page.locator(".topbar .brand").inner_text()
            assert "Tallybook" in header and "supportrag" not in page.content()
            assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).backgroundColor") \
                == "rgb(10, 125, 90)"
            page.screenshot(path=str(screenshots / f"help-brand{suffix}.png"))
            page.goto(f"{served['base_url']}/help/articles/{served['article']}")
            table = page.locator(".article-body table")
            assert table.locator("th").all_inner_texts() == ["Plan", "Requests per minute", "Price"]
            assert table.locator("tbody tr").count() == 3
            assert _fits_the_width(page, context.pages[0].viewport_size["width"])
            page.screenshot(path=str(screenshots / f"help-article-table{suffix}.png"), full_page=True)
        finally:
            context.close()


def test_the_rating_control_is_two_choices_with_the_radio_beside_its_word(browser, served, screenshots):
    ticket_id = served["tickets"][0]
    for suffix, context in _contexts(browser):
        try:
            page = context.new_page()
            page.goto(f"{served['base_url']}/help/tickets/{ticket_id}/rate?token=x")
            good, bad = page.get_by_label("Good"), page.get_by_label("Bad")
            for radio, word in ((good, "Good"), (bad, "Bad")):
                box = radio.bounding_box()
                label = page.locator("label", has_text=word).bounding_box()
                assert box["width"] < 30  # a radio, not a full-width input
                assert box["x"] + box["width"] <= label["x"] + label["width"] / 2  # left of its word
                assert abs((box["y"] + box["height"] / 2) - (label["y"] + label["height"] / 2)) < 4  # same line
            assert abs(good.bounding_box()["y"] - bad.bounding_box()["y"]) < 4  # side by side
            assert page.evaluate("getComputedStyle(document.querySelector('.rating-choice')).borderTopWidth") \
                == "0px"
            page.locator("label", has_text="Good").click()
            assert good.is_checked()
            page.screenshot(path=str(screenshots / f"help-rating{suffix}.png"))
        finally:
            context.close()


def _logged_in_state(browser, base_url: str) -> Any:
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        log_in(page, base_url)
        return context.storage_state()
    finally:
        context.close()


def test_on_a_phone_the_first_tickets_and_the_thread_are_above_the_fold(browser, served, screenshots):
    state = _logged_in_state(browser, served["base_url"])
    for suffix, context in _contexts(browser, state):
        try:
            page = context.new_page()
            height = context.pages[0].viewport_size["height"]
            page.goto(f"{served['base_url']}/admin/inbox?queue=all")
            rows = page.locator("table.desk tbody tr")
            assert rows.count() == 3
            assert rows.nth(0).bounding_box()["y"] + rows.nth(0).bounding_box()["height"] <= height
            assert _fits_the_width(page, context.pages[0].viewport_size["width"])
            page.screenshot(path=str(screenshots / f"agent-tickets-list-first-week{suffix}.png"))
            page.goto(f"{served['base_url']}/admin/inbox/{served['tickets'][0]}")
            page.screenshot(path=str(screenshots / f"agent-workspace-first-week{suffix}.png"))
            first_message = page.locator(".messages .message").first.bounding_box()
            assert first_message["y"] < height * 0.6  # the thread starts in the first screen's upper part
            assert _fits_the_width(page, context.pages[0].viewport_size["width"])
            page.goto(f"{served['base_url']}/admin/inbox/customers/maria@acme.example")
            assert page.locator("table.desk tbody tr").count() == 2
            assert re.search("Tickets from maria@acme.example", page.locator("h1").inner_text())
            page.screenshot(path=str(screenshots / f"agent-customer-page{suffix}.png"))
            page.goto(f"{served['base_url']}/admin/dashboard")
            assert page.locator("h1").inner_text().endswith("Self-service")
            assert _fits_the_width(page, context.pages[0].viewport_size["width"])
            page.screenshot(path=str(screenshots / f"dashboard-self-service{suffix}.png"))
        finally:
            context.close()
