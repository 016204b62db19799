"""The help center in headless Chromium against a real ``supportrag serve`` (offline: extractive answers).

One story in order, on one server and database: the dashboard starts at zero; a customer types and sees
suggestions, gets an answer citing the right section and marks it solved; an off-topic question is handed off
and escalated with an email; an answer that did not help is escalated; a phone without JavaScript asks and marks
it solved; the dashboard then shows exactly those outcomes. Screenshots as in tests/test_admin_browser.py.
"""

from __future__ import annotations

import re

from . import test_admin_browser
from .test_admin_browser import PHONE, article_id_by_title, log_in

# The admin browser test's fixture (a fresh database served by `supportrag serve`), one instance for this module.
served = test_admin_browser.server

PASSWORD_QUESTION = "I didn't get the password reset email, even in spam"
OFF_TOPIC = "What is the capital of France?"
REFUND_QUESTION = "How do I get my money back for an order I returned?"
PAYMENT_QUESTION = "Which payment methods do you accept? Can I pay with PayPal?"
EXPECTED_TOTALS = {"total-asked": "4", "total-answered": "3", "total-solved": "2", "total-escalated": "2",
                   "total-handed-off": "1", "deflection-rate": "50%"}


# The admin browser tests' desktop page, for this module too.
page = test_admin_browser.page


def ask(page, base_url: str, question: str) -> None:
    """Open the help center, describe the problem, get an answer on the ticket's secret page."""
    page.goto(f"{base_url}/help")
    page.get_by_label("Describe your problem").fill(question)
    page.get_by_role("button", name="Get an answer").click()
    page.wait_for_url(re.compile(r"/help/tickets/\d+$"))


def totals(page) -> dict[str, str]:
    """The dashboard's headline numbers by element id."""
    return {key: page.locator(f"#{key}").text_content() for key in EXPECTED_TOTALS}


def test_dashboard_starts_with_no_questions(page, served):
    log_in(page, served["base_url"])
    page.goto(f"{served['base_url']}/admin/dashboard?days=7")
    assert totals(page) == {**{key: "0" for key in EXPECTED_TOTALS}, "deflection-rate": "—"}


def test_newcomer_an_off_topic_question_suggests_no_article_below_the_gate_floor(page, served):
    page.goto(f"{served['base_url']}/help")
    description = page.get_by_label("Describe your problem")
    description.fill(PASSWORD_QUESTION)
    page.locator("#suggestion-list li").first.wait_for()
    with page.expect_response(lambda response: response.url.endswith("/api/search")) as searched:
        description.fill(OFF_TOPIC)
    results = searched.value.json()["results"]
    assert results and max(result["similarity"] for result in results) < 0.30  # ranked, but all far off
    page.wait_for_function("document.getElementById('suggestions').hidden")
    assert page.locator("#suggestion-list li").count() == 0


def test_customer_sees_suggestions_gets_a_cited_answer_and_marks_it_solved(page, served, screenshots):
    base_url = served["base_url"]
    page.goto(base_url)
    assert page.url == f"{base_url}/help"
    page.get_by_label("Describe your problem").press_sequentially(PASSWORD_QUESTION, delay=15)
    first = page.locator("#suggestion-list li").first
    first.wait_for()
    assert page.locator("#suggestion-list li").count() <= 3
    assert first.locator("a").text_content() == "Reset your password"
    assert first.locator(".section").text_content() == "Reset your password › Didn't get the reset email?"
    assert first.locator("a").get_attribute("href").endswith("#didnt-get-the-reset-email")
    assert first.locator(".snippet").text_content()
    page.screenshot(path=str(screenshots / "help-suggestions.png"), full_page=True)

    page.get_by_role("button", name="Get an answer").click()
    page.wait_for_url(re.compile(r"/help/tickets/\d+$"))
    assert page.get_by_role("heading", name="Our answer").is_visible()
    article_id = article_id_by_title(base_url, "Reset your password")
    source = page.locator("ol.sources a").first
    assert source.get_attribute("href") == f"/help/articles/{article_id}#didnt-get-the-reset-email"
    assert source.text_content() == "Reset your password › Didn't get the reset email?"
    page.screenshot(path=str(screenshots / "help-answer.png"), full_page=True)
    ticket_url = page.url

    source.click()
    page.wait_for_url(f"{base_url}/help/articles/{article_id}#didnt-get-the-reset-email")
    assert page.locator("h2#didnt-get-the-reset-email").is_visible()
    page.screenshot(path=str(screenshots / "help-article.png"))

    page.goto(ticket_url)
    page.get_by_role("button", name="Yes, it's solved").click()
    page.get_by_role("heading", name="Glad that helped").wait_for()


def test_off_topic_question_is_handed_off_and_escalated_with_a_reference(page, served, screenshots):
    ask(page, served["base_url"], OFF_TOPIC)
    assert page.get_by_role("heading", name="We need a person for this one").is_visible()
    assert page.get_by_role("button", name="Yes, it's solved").count() == 0
    page.get_by_label("Your email").fill("ana@example.com")
    page.get_by_role("button", name="Send to an agent").click()
    page.get_by_role("heading", name="A support agent has your question").wait_for()
    reference = page.locator(".reference").text_content()
    assert re.fullmatch(r"T-\d+", reference) and reference in page.url.replace("/help/tickets/", "T-")
    assert "ana@example.com" in page.locator(".confirmation").text_content()
    page.screenshot(path=str(screenshots / "help-escalation.png"), full_page=True)

    # The ticket's cookie (set from its secret) is the only way in: another browser finds nothing at its URL.
    assert "?" not in page.url
    stranger = page.context.browser.new_context()
    try:
        elsewhere = stranger.new_page()
        elsewhere.goto(page.url)
        assert elsewhere.get_by_role("heading", name="Not found").is_visible()
    finally:
        stranger.close()


def test_an_answer_that_did_not_help_goes_to_an_agent(page, served):
    ask(page, served["base_url"], REFUND_QUESTION)
    assert "How to request a refund" in page.locator("ol.sources").text_content()
    page.get_by_label("Your email").fill("bo@example.com")
    page.get_by_role("button", name="No, talk to a person").click()
    page.get_by_role("heading", name="A support agent has your question").wait_for()


def test_phone_without_javascript_asks_and_marks_solved(browser, served, screenshots):
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    context.set_default_timeout(60_000)
    try:
        page = context.new_page()
        ask(page, served["base_url"], PAYMENT_QUESTION)
        assert "Payment methods accepted" in page.locator("ol.sources").text_content()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.screenshot(path=str(screenshots / "help-phone.png"), full_page=True)
        page.get_by_role("button", name="Yes, it's solved").click()
        page.get_by_role("heading", name="Glad that helped").wait_for()
    finally:
        context.close()


def test_dashboard_counts_what_the_customers_did(page, served, screenshots):
    log_in(page, served["base_url"])
    page.goto(f"{served['base_url']}/admin/dashboard?days=7")
    assert totals(page) == EXPECTED_TOTALS
    cited = page.locator("table.cited").text_content()
    assert "Reset your password" in cited and "How to request a refund" in cited
    # Today's stack: two solved, two escalated (the handed-off question left an email).
    assert [page.locator(f"svg.chart rect.bar-{series}").count() for series in ("solved", "escalated")] == [1, 1]
    assert "2 solved by the answer" in page.locator("svg.chart rect.bar-solved title").text_content()
    print("deflection numbers:", totals(page))  # quoted in the README's "For customers"
    page.screenshot(path=str(screenshots / "dashboard.png"), full_page=True)


def test_newcomer_the_dashboard_chart_labels_are_readable_at_phone_width(browser, served):
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(60_000)
    try:
        phone = context.new_page()
        log_in(phone, served["base_url"])
        phone.goto(f"{served['base_url']}/admin/dashboard?days=7")
        heights = phone.evaluate("[...document.querySelectorAll('svg.chart .tick')]"
                                 ".map(t => t.getBoundingClientRect().height)")
        assert heights and min(heights) >= 9  # px on screen; 11 units at phone width drew about 5
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        context.close()
