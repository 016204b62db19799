"""The agents' team work in headless Chromium against a real ``supportrag serve`` (two gunicorn workers, each
with its mail thread) and a real SMTP server on loopback (issue 25 items 4-6).

One story in order: a customer asks for a person; both agents get the "needs an agent" e-mail; Agnes takes the
ticket and Bert opens it too: each sees the other; Agnes replies; the customer's e-mail reply comes in through
the signed webhook: Agnes is e-mailed (the latency is measured and printed), the ticket is unread in her list with
a count in the navigation, and Bert, still on the page, is warned before sending over it; Agnes solves it; the
customer rates it from the solve e-mail's link; the dashboard shows the rating.
"""

from __future__ import annotations

import re
import time
import urllib.request
from email.message import EmailMessage
from typing import Any, Callable, Iterator

import pytest

from service.intake.signature import sign

from .smtp_server import SmtpSink, sending_env
from .test_admin_browser import DESKTOP, PHONE, run_cli
from .test_serve import serve_fresh_database

PASSWORD = "agent password 1"
AGENTS = {"agnes": ("Agnes", "agnes@team.test"), "bert": ("Bert B.", "bert@team.test")}
CUSTOMER = "bo@example.com"
QUESTION = "My parcel arrived damaged and the box was open. What now?"
SECRET = "browser-inbound-secret"


@pytest.fixture(scope="module")
def served(pg_url, served_template, tmp_path_factory, smtp) -> Iterator[dict[str, Any]]:
    """A fresh database with two agents (display names, e-mails), served with SMTP and the inbound webhook."""
    def prepare(env: dict[str, str], base_url: str) -> None:
        env.update(sending_env(smtp, base_url), INBOUND_EMAIL_SECRET=SECRET, PRESENCE_SECONDS="8",
                   WEB_CONCURRENCY="2")
        for name, (display, address) in AGENTS.items():
            run_cli(env, "admin", "create", "--username", name, "--password", PASSWORD, "--role", "agent",
                    "--email", address, "--display-name", display)

    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("team-browser"),
                              template=served_template, prepare=prepare) as served:
        yield {"base_url": served["base_url"], "env": served["env"]}


@pytest.fixture(scope="module")
def story() -> dict[str, Any]:
    """What one step of the story hands to the next."""
    return {}


def _context(browser, viewport=DESKTOP):
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(60_000)
    return context


@pytest.fixture(scope="module")
def customer(browser) -> Iterator[Any]:
    context = _context(browser)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def agnes(browser) -> Iterator[Any]:
    context = _context(browser)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def bert(browser) -> Iterator[Any]:
    context = _context(browser)
    yield context.new_page()
    context.close()


def wait_for_mail(smtp: SmtpSink, match: Callable[[EmailMessage], bool], timeout: float = 30.0) -> EmailMessage:
    """The first message received that ``match``es, waiting for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [m for m in list(smtp.inbox) if match(m)]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no such e-mail within {timeout} s; got {[m['Subject'] for m in smtp.inbox]}")


def log_in(page, base_url: str, name: str) -> None:
    page.goto(f"{base_url}/admin/inbox")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/admin/inbox")


def test_1_a_customer_asks_for_a_person_and_every_agent_is_told(customer, served, story, smtp):
    customer.goto(f"{served['base_url']}/help")
    customer.get_by_label("Describe your problem").fill(QUESTION)
    customer.get_by_role("button", name="Get an answer").click()
    customer.wait_for_url(re.compile(r"/help/tickets/\d+$"))
    customer.get_by_label("Your email").fill(CUSTOMER)
    customer.get_by_role("button", name=re.compile("talk to a person|Send to an agent")).click()
    customer.get_by_role("heading", name="A support agent has your question").wait_for()
    story["ticket_id"] = ticket_id = int(re.search(r"/help/tickets/(\d+)", customer.url).group(1))
    for _, address in AGENTS.values():
        notice = wait_for_mail(smtp, lambda m, a=address: m["To"] == a and f"[T-{ticket_id}] Needs an agent" in m["Subject"])
        assert f"/admin/inbox/{ticket_id}" in notice.get_content()


def test_2_two_agents_on_one_ticket_see_each_other(agnes, bert, served, story, screenshots):
    base_url, ticket_id = served["base_url"], story["ticket_id"]
    log_in(agnes, base_url, "agnes")
    agnes.get_by_role("link", name=re.compile(rf"^T-{ticket_id} ")).click()
    agnes.get_by_role("button", name="Assign to me").click()
    log_in(bert, base_url, "bert")
    bert.goto(f"{base_url}/admin/inbox/{ticket_id}")
    bert.locator("#presence", has_text="Agnes is viewing").wait_for()
    agnes.locator("#presence", has_text="Bert B. is viewing").wait_for()
    bert.get_by_label("Your reply").focus()
    agnes.locator("#presence", has_text="Bert B. is replying").wait_for()
    agnes.screenshot(path=str(screenshots / "agent-team-presence.png"), full_page=True)


def test_3_agnes_replies_and_the_customer_sees_her_display_name(agnes, customer, served, story, smtp):
    agnes.get_by_label("Your reply").fill("Sorry about that! Could you send a photo of the box?")
    agnes.get_by_role("button", name="Send, set pending").click()
    agnes.locator(".flash-success").wait_for()
    reply = wait_for_mail(smtp, lambda m: m["To"] == CUSTOMER and "photo of the box" in m.get_content())
    assert reply["From"] == "Agnes <support@example.com>"
    story["reply"] = reply
    customer.reload()
    assert "Agnes" in customer.locator("#thread").text_content()
    assert "agnes" not in customer.content()


def test_4_the_customers_email_reply_notifies_agnes_marks_it_unread_and_warns_bert(
        agnes, bert, served, story, smtp, screenshots, capsys):
    base_url, ticket_id, reply = served["base_url"], story["ticket_id"], story["reply"]
    answer = EmailMessage()
    answer["From"], answer["To"] = f"Bo <{CUSTOMER}>", reply["Reply-To"]
    answer["Subject"], answer["Message-ID"] = f"Re: {reply['Subject']}", "<bo-photo@customer.test>"
    answer["In-Reply-To"] = reply["Message-ID"]
    answer.set_content("Here it is: the box was torn on one side.")
    raw = bytes(answer)
    request = urllib.request.Request(f"{base_url}/api/inbound/email", data=raw, method="POST", headers={
        "Content-Type": "message/rfc822", "X-Signature": sign(SECRET, raw, int(time.time()))})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=60) as response:
        assert b'"follow_up"' in response.read()
    stored = time.monotonic()
    notice = wait_for_mail(smtp, lambda m: m["To"] == "agnes@team.test" and "Customer replied" in m["Subject"])
    received = time.monotonic()
    assert "the box was torn" in notice.get_content()
    with capsys.disabled():
        print(f"\nnotification latency: customer e-mail reply -> assignee's e-mail received {received - started:.2f} s"
              f" (webhook answered in {stored - started:.2f} s; outbox to SMTP {received - stored:.2f} s)")
    bert.locator("#newer-message").wait_for(state="visible")
    bert.get_by_label("Your reply").fill("Bert here: we will replace it.")
    bert.get_by_role("button", name="Send, set pending").click()
    assert bert.url.endswith(f"/admin/inbox/{ticket_id}")  # stopped once, nothing sent
    assert bert.locator(".flash-success").count() == 0
    agnes.goto(f"{base_url}/admin/inbox?queue=mine")
    row = agnes.locator("tr", has=agnes.get_by_role("link", name=re.compile(rf"^T-{ticket_id} ")))
    assert row.locator(".badge-unread").is_visible() and agnes.locator("#unread-count").text_content() == "1"
    agnes.screenshot(path=str(screenshots / "agent-tickets-list.png"), full_page=True)
    phone = agnes.context.browser.new_context(viewport=PHONE, storage_state=agnes.context.storage_state())
    try:
        page = phone.new_page()
        page.goto(f"{base_url}/admin/inbox?queue=mine")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert page.locator(".badge-unread").is_visible()
        page.screenshot(path=str(screenshots / "agent-tickets-list-phone.png"), full_page=True)
    finally:
        phone.close()


def test_5_agnes_solves_it_and_the_rating_from_the_email_shows_on_the_dashboard(agnes, customer, served, story,
                                                                                smtp, screenshots):
    base_url, ticket_id = served["base_url"], story["ticket_id"]
    agnes.goto(f"{base_url}/admin/inbox/{ticket_id}")
    assert agnes.locator("#unread-count").count() == 0  # opening it read it
    agnes.get_by_label("Your reply").fill("A replacement is on its way.")
    agnes.get_by_role("button", name="Send, mark solved").click()
    agnes.locator(".flash-success").wait_for()
    solve = wait_for_mail(smtp, lambda m: m["To"] == CUSTOMER and "replacement is on its way" in m.get_content())
    link = re.search(r"http://\S+/rate\?token=\S+", solve.get_content()).group(0)
    customer.goto(link)
    customer.get_by_label("Good").check()
    customer.get_by_label("Comment").fill("Fast and friendly")
    customer.get_by_role("button", name="Send rating").click()
    customer.get_by_text("Thank you for your rating.").wait_for()
    agnes.goto(f"{base_url}/admin/dashboard")
    row = agnes.locator("#csat tr", has_text="Agnes (agnes)")
    assert row.locator("td").all_text_contents()[1:] == ["1", "0", "100%"]
    agnes.locator("#csat").screenshot(path=str(screenshots / "agent-team-csat.png"))
