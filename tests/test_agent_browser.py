"""The agent's side in headless Chromium, against a real ``supportrag serve`` (gunicorn, two workers, each with
its mail thread) and a real SMTP server on loopback.

One story in order: a customer escalates on /help; an agent logs in, takes the ticket from the unassigned
queue, edits the AI draft (never the answer the customer turned down) and sends it; the customer's page shows the reply;
the e-mail arrives threaded; the customer's reply, piped through ``supportrag mail pipe``, reopens the ticket;
the agent solves it; the dashboard's Drafts panel counts it. Screenshots as in tests/test_admin_browser.py.
"""

from __future__ import annotations

import re
import subprocess
from email.message import EmailMessage
from typing import Any, Iterator

import pytest

from .smtp_server import sending_env
from .test_admin_browser import DESKTOP, PHONE, article_id_by_title, run_cli
from .test_serve import SUPPORTRAG, serve_fresh_database

AGENT, AGENT_PASSWORD = "agnes", "agent password 1"
REFUND_QUESTION = "How do I get my money back for an order I returned?"
CUSTOMER = "bo@example.com"


@pytest.fixture(scope="module")
def served(pg_url, served_template, tmp_path_factory, smtp) -> Iterator[dict[str, Any]]:
    """A fresh database with one agent, served by ``supportrag serve`` with SMTP and plus-addressed replies."""
    def prepare(env: dict[str, str], base_url: str) -> None:
        env.update(sending_env(smtp, base_url), WEB_CONCURRENCY="2")
        run_cli(env, "admin", "create", "--username", AGENT, "--password", AGENT_PASSWORD, "--role", "agent")

    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("agent-browser"),
                              template=served_template, prepare=prepare) as served:
        yield {"base_url": served["base_url"], "env": served["env"]}


@pytest.fixture(scope="module")
def story() -> dict[str, Any]:
    """What one step of the story hands to the next."""
    return {}


@pytest.fixture(scope="module")
def customer(browser) -> Iterator[Any]:
    """The customer's browser (desktop)."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def agent(browser) -> Iterator[Any]:
    """The agent's browser (desktop), logged in once."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def test_1_a_customer_escalates_on_the_help_page(customer, served, story, smtp):
    base_url = served["base_url"]
    customer.goto(f"{base_url}/help")
    customer.get_by_label("Describe your problem").fill(REFUND_QUESTION)
    customer.get_by_role("button", name="Get an answer").click()
    customer.wait_for_url(re.compile(r"/help/tickets/\d+$"))  # the secret is in a cookie, not the URL
    customer.get_by_label("Your email").fill(CUSTOMER)
    customer.get_by_role("button", name="No, talk to a person").click()
    customer.get_by_role("heading", name="A support agent has your question").wait_for()
    story["ticket_url"] = customer.url.split("#")[0]
    story["ticket_id"] = int(re.search(r"/help/tickets/(\d+)", customer.url).group(1))
    [ack] = smtp.wait_for(1)
    assert ack["To"] == CUSTOMER and story["ticket_url"] in ack.get_content()
    story["ack"] = ack


def test_2_the_agent_sees_it_unassigned_and_assigns_it(agent, served, story, screenshots):
    base_url, ticket_id = served["base_url"], story["ticket_id"]
    agent.goto(f"{base_url}/admin/inbox")
    agent.get_by_label("Username").fill(AGENT)
    agent.get_by_label("Password").fill(AGENT_PASSWORD)
    agent.get_by_role("button", name="Log in").click()
    agent.wait_for_url(f"{base_url}/admin/inbox")
    assert agent.get_by_role("link", name="New article").count() == 0  # an agent does not manage articles
    row = agent.get_by_role("link", name=re.compile(rf"^T-{ticket_id} "))
    assert row.is_visible()
    agent.screenshot(path=str(screenshots / "agent-inbox.png"), full_page=True)
    row.click()
    agent.get_by_role("button", name="Assign to me").click()
    assert agent.locator(".assignee").text_content() == AGENT
    agent.goto(f"{base_url}/admin/inbox?queue=mine")
    assert agent.get_by_role("link", name=re.compile(rf"^T-{ticket_id} ")).is_visible()


def test_3_the_draft_cites_the_refund_section_and_the_agent_edits_and_sends_it(agent, served, story, screenshots):
    base_url, ticket_id = served["base_url"], story["ticket_id"]
    agent.goto(f"{base_url}/admin/inbox/{ticket_id}")
    composer = agent.get_by_label("Your reply")
    draft = composer.input_value()
    # The customer turned the refund answer down ("No, talk to a person"): the draft never offers it again, and
    # whatever it cites instead is listed as its sources (issue 34 item 8).
    refund_id = article_id_by_title(base_url, "How to request a refund")
    assert draft.startswith("Hello,") and f"/help/articles/{refund_id}" not in draft
    assert all(link.get_attribute("href") in draft for link in agent.locator(".evidence ol.sources a").all())
    agent.screenshot(path=str(screenshots / "agent-workspace.png"), full_page=True)
    # The agent writes the answer in place of the draft's notice, if it has one (nothing to send as it stands).
    notice = agent.locator("#draft-notice")
    line = notice.get_attribute("data-notice") if notice.count() else None
    edited = draft.replace(line, "") if line else draft
    composer.fill(edited.replace("Best regards,", "Your refund reaches you within 5 business days.\n\nBest regards,"))
    agent.get_by_role("button", name="Send, set pending").click()
    agent.locator(".flash-success").wait_for()
    assert "pending" in agent.locator(".flash-success").text_content()


def test_4_the_customer_page_shows_the_reply(customer, story, screenshots):
    customer.goto(story["ticket_url"])
    customer.reload()  # the same address as the page already open: load it again
    thread = customer.locator("#thread")
    assert "within 5 business days" in thread.text_content()
    customer.screenshot(path=str(screenshots / "agent-customer-thread.png"), full_page=True)


def test_5_the_reply_email_arrives_threaded(smtp, story):
    ack, reply = smtp.wait_for(2)[:2]
    assert "within 5 business days" in reply.get_content()
    assert reply["In-Reply-To"] == ack["Message-ID"] and ack["Message-ID"] in reply["References"]
    assert re.fullmatch(r"support\+[\w-]+@example\.com", reply["Reply-To"])
    story["reply"] = reply


def test_6_the_customers_email_reply_piped_in_reopens_the_ticket(served, story, agent):
    reply = story["reply"]
    answer = EmailMessage()
    answer["From"], answer["To"] = f"Bo <{CUSTOMER}>", reply["Reply-To"]
    answer["Subject"], answer["Message-ID"] = f"Re: {reply['Subject']}", "<bo-1@customer.test>"
    answer["In-Reply-To"], answer["References"] = reply["Message-ID"], f"{reply['References']} {reply['Message-ID']}"
    answer.set_content("It has been a week and nothing arrived.\n\n"
                       "On Tue, Dec 1, 2026 at 10:00 AM Support <support@example.com> wrote:\n"
                       + "".join(f"> {line}\n" for line in reply.get_content().splitlines()))
    done = subprocess.run([str(SUPPORTRAG), "mail", "pipe"], env=served["env"], input=bytes(answer),
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert b'"action": "follow_up"' in done.stdout
    agent.goto(f"{served['base_url']}/admin/inbox/{story['ticket_id']}")
    messages = agent.locator(".messages .message-customer")
    assert messages.last.locator("pre").text_content() == "It has been a week and nothing arrived."
    assert agent.locator(".page-head .status").text_content() == "open"


def test_7_the_agent_solves_it(agent, served, story, browser, screenshots):
    agent.get_by_label("Your reply").fill("I have re-sent your refund; you will see it tomorrow.")
    agent.get_by_role("button", name="Send, mark solved").click()
    agent.locator(".flash-success").wait_for()
    assert agent.locator(".page-head .status").text_content() == "solved"
    phone = browser.new_context(viewport=PHONE, storage_state=agent.context.storage_state())
    try:
        page = phone.new_page()
        page.goto(f"{served['base_url']}/admin/inbox/{story['ticket_id']}")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert page.get_by_role("link", name="Self-service").is_visible()
        page.screenshot(path=str(screenshots / "agent-workspace-phone.png"), full_page=True)
    finally:
        phone.close()


def test_8_the_dashboard_drafts_panel_counts_it(agent, served, screenshots, capsys, smtp):
    agent.goto(f"{served['base_url']}/admin/dashboard")
    panel = {key: agent.locator(f"#{key}").text_content() for key in (
        "drafts-replies", "drafts-unchanged", "drafts-edited", "drafts-replaced", "drafts-median-edit",
        "first-response-median", "first-response-p90", "solved-by-ai", "solved-by-agent")}
    assert panel["drafts-replies"] == "2" and panel["drafts-edited"] == "1" and panel["drafts-replaced"] == "1"
    assert panel["solved-by-agent"] == "1" and panel["first-response-median"] != "—"
    agent.locator("#drafts").screenshot(path=str(screenshots / "agent-drafts-panel.png"))
    assert len(smtp.wait_for(3)) == 3  # the acknowledgement and two replies, once each (two gunicorn workers)
    with capsys.disabled():
        print(f"\nagent browser run, Drafts panel: {panel}")
