"""The customer's help center through the Flask test client: ask, answer, solved / escalated, secrets, CSRF."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from service.db.models import Article, Ticket
from service.web.help.markdown import render_answer, render_article, section_anchor, slugify

from .admin_helpers import csrf_from

PASSWORD_QUESTION = "I forgot my password and the reset email never arrived"
OFF_TOPIC = "What is the capital of France?"
_TICKET_URL = re.compile(r"/help/tickets/(\d+)$")  # a clean URL: the secret travels in a cookie


def ask(client, description: str, **extra: str):
    """Submit the help form the way a browser does (CSRF token from the page)."""
    token = csrf_from(client.get("/help").get_data(as_text=True))
    return client.post("/help/ask", data={"csrf_token": token, "description": description, **extra})


def asked(client, description: str) -> tuple[int, str, str]:
    """Ask and follow the redirect: (ticket id, key, the ticket page's HTML)."""
    response = ask(client, description)
    assert response.status_code == 303
    ticket_id = int(_TICKET_URL.search(response.headers["Location"]).group(1))
    key = client.get_cookie(f"ticket_{ticket_id}", path=f"/help/tickets/{ticket_id}").value
    page = client.get(response.headers["Location"])
    assert page.status_code == 200
    return ticket_id, key, page.get_data(as_text=True)


def post_form(client, url: str, page_html: str, **fields: str):
    """Post a form with the CSRF token the page carried."""
    return client.post(url, data={"csrf_token": csrf_from(page_html), **fields})


@pytest.mark.parametrize("text, slug", [
    ("Didn't get the reset email?", "didnt-get-the-reset-email"),
    ("How to reset your password", "how-to-reset-your-password"),
    ("  Refunds & returns -- FAQ ", "refunds-returns-faq"),
    ("???", "section"),
])
def test_slugify_makes_heading_anchors(text, slug):
    assert slugify(text) == slug


@pytest.mark.parametrize("label, anchor", [
    ("Reset your password › Didn't get the reset email?", "didnt-get-the-reset-email"),
    ("Guide › Setup › Step two", "step-two"),
    ("Just a title", None),
    (None, None),
])
def test_section_anchor_is_the_last_heading_of_the_label(label, anchor):
    assert section_anchor(label) == anchor


def test_article_markdown_is_rendered_without_raw_html_or_script_links():
    html = str(render_article("Intro\n\n## Step one\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1))\n\n"
                              "## Step one\n\n```\n## not a heading\n```"))
    assert '<h2 id="step-one">Step one</h2>' in html and '<h2 id="step-one-2">' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html
    assert 'id="not-a-heading"' not in html


def test_answer_markdown_links_known_citations_and_escapes_the_rest():
    html = str(render_answer("Reset it [1], see [3].\n\n## Steps\n\n<b>x</b> `[1]`", {1: "/help/articles/4#a-b"}))
    assert '<a href="/help/articles/4#a-b">[1]</a>' in html and "see [3]." in html
    assert "<h2>Steps</h2>" in html and "&lt;b&gt;x&lt;/b&gt;" in html and "<code>[1]</code>" in html


def test_answer_markdown_keeps_only_links_to_this_site():
    html = str(render_answer("[Phish](https://evil.example/login) <https://evil.example> ![t](https://x/t.png) "
                             "[ok](/help/articles/1) [far](//evil.example)", {}))
    assert 'href="https:' not in html and 'href="//' not in html and "<img" not in html
    assert "Phish" in html and '<a href="/help/articles/1">ok</a>' in html


def test_root_redirects_to_the_help_center(anonymous_client):
    response = anonymous_client.get("/")
    assert response.status_code == 302 and response.headers["Location"].endswith("/help")


def test_help_page_is_public_with_the_form_and_categories(anonymous_client, seeded):
    html = anonymous_client.get("/help").get_data(as_text=True)
    assert "Describe your problem" in html and 'name="csrf_token"' in html
    assert "Account" in html and "Reset your password" in html


def test_article_page_renders_sections_with_anchors(anonymous_client, seeded):
    with seeded.session() as session:
        article_id = session.scalar(sa.select(Article.id).where(Article.title == "Reset your password"))
    response = anonymous_client.get(f"/help/articles/{article_id}")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert '<h2 id="didnt-get-the-reset-email">' in html
    assert anonymous_client.get("/help/articles/999999").status_code == 404


def test_asking_answers_with_a_cited_article_linked_to_its_section(anonymous_client, seeded):
    ticket_id, _, html = asked(anonymous_client, PASSWORD_QUESTION)
    assert "Our answer" in html and "Did this solve your problem?" in html
    assert re.search(r'href="/help/articles/\d+#[a-z-]+"', html)
    assert "Reset your password ›" in html
    assert f"T-{ticket_id}" in html


def test_yes_records_the_ticket_as_self_served(anonymous_client, seeded):
    ticket_id, key, html = asked(anonymous_client, PASSWORD_QUESTION)
    response = post_form(anonymous_client, f"/help/tickets/{ticket_id}/solved", html, key=key)
    assert response.status_code == 303
    page = anonymous_client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Glad that helped" in page
    with seeded.session() as session:
        ticket = session.get(Ticket, ticket_id)
        assert ticket.resolved_at is not None and ticket.escalated_at is None


def test_off_topic_question_is_handed_off_and_escalated_with_the_email(anonymous_client, seeded):
    ticket_id, key, html = asked(anonymous_client, OFF_TOPIC)
    assert "We need a person for this one" in html and "Did this solve" not in html
    bad = post_form(anonymous_client, f"/help/tickets/{ticket_id}/escalate", html, key=key, email="nope")
    assert bad.status_code == 400 and "email address" in bad.get_data(as_text=True)
    response = post_form(anonymous_client, f"/help/tickets/{ticket_id}/escalate", html, key=key,
                         email="ana@example.com")
    page = anonymous_client.get(response.headers["Location"]).get_data(as_text=True)
    assert "A support agent has your question" in page and f"T-{ticket_id}" in page
    with seeded.session() as session:
        ticket = session.get(Ticket, ticket_id)
        assert (ticket.status, ticket.escalation_reason, ticket.customer_email) == (
            "needs_agent", "handed_off", "ana@example.com")


def test_no_after_an_answer_escalates_as_not_solved(anonymous_client, seeded):
    ticket_id, key, html = asked(anonymous_client, PASSWORD_QUESTION)
    post_form(anonymous_client, f"/help/tickets/{ticket_id}/escalate", html, key=key, email="bo@example.com")
    with seeded.session() as session:
        assert session.get(Ticket, ticket_id).escalation_reason == "not_solved"


def test_talk_to_a_person_directly_escalates_at_once(anonymous_client, seeded):
    response = ask(anonymous_client, PASSWORD_QUESTION, email="cy@example.com", person="1")
    ticket_id = int(_TICKET_URL.search(response.headers["Location"]).group(1))
    with seeded.session() as session:
        assert session.get(Ticket, ticket_id).escalation_reason == "asked_for_person"


@pytest.mark.parametrize("query", ["", "?key=", "?key=wrong-secret"])
def test_ticket_page_needs_the_ticket_own_secret(app, anonymous_client, seeded, query):
    ticket_id, _, _ = asked(anonymous_client, PASSWORD_QUESTION)
    assert app.test_client().get(f"/help/tickets/{ticket_id}{query}").status_code == 404


def test_one_customer_key_does_not_open_another_ticket(anonymous_client, seeded):
    _, first_key, _ = asked(anonymous_client, PASSWORD_QUESTION)
    second_id, _, html = asked(anonymous_client, OFF_TOPIC)
    assert anonymous_client.get(f"/help/tickets/{second_id}?key={first_key}").status_code == 404
    forged = post_form(anonymous_client, f"/help/tickets/{second_id}/solved", html, key=first_key)
    assert forged.status_code == 404


def test_help_forms_need_the_csrf_token(anonymous_client, seeded):
    anonymous_client.get("/help")
    response = anonymous_client.post("/help/ask", data={"description": PASSWORD_QUESTION})
    assert response.status_code == 403 and "CSRF" in response.get_data(as_text=True)


def test_everything_the_customer_typed_is_escaped(anonymous_client, seeded):
    _, _, html = asked(anonymous_client, "<script>alert('x')</script> password reset [1]")
    assert "<script>alert" not in html and "&lt;script&gt;" in html


def test_empty_question_is_asked_again_with_a_message(anonymous_client, seeded):
    response = ask(anonymous_client, "   ")
    assert response.status_code == 400 and "Please describe your problem" in response.get_data(as_text=True)


def test_help_pages_never_leak_the_ticket_link_as_a_referrer(anonymous_client, seeded):
    response = anonymous_client.get("/help")
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert "default-src 'self'" in response.headers["Content-Security-Policy"]
