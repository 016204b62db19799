"""A support lead's first week (issue 37): tables, customer search, one category per name, branding."""

from __future__ import annotations

import re

from service.web.help.markdown import render_answer, render_article

PRICING = ("Our plans:\n\n| Plan | Requests per minute |\n|------|--------------------:|\n"
           "| Free | 60 |\n| Pro <script>x</script> | [600](javascript:alert(1)) |\n")


def _add_article(client, title: str, content: str, category: str | None = None) -> int:
    response = client.post("/api/articles", json={"title": title, "content": content, "category": category})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["article"]["id"]


def test_markdown_table_renders_as_a_table_with_the_same_escaping():
    html = str(render_article(PRICING))
    assert "<table>" in html and "<th>Plan</th>" in html and "<td>Free</td>" in html
    assert "| Plan |" not in html
    assert "<script>" not in html and "&lt;script&gt;" in html and 'href="javascript' not in html


def test_answer_table_renders_as_a_table_and_keeps_links_on_site():
    html = str(render_answer("See [1].\n\n| Plan | Limit |\n|---|---|\n| Pro | [x](https://evil.example) 600 |",
                             {1: "/help/articles/3"}))
    assert "<table>" in html and "<td>Pro</td>" in html
    assert 'href="https:' not in html and '<a href="/help/articles/3">[1]</a>' in html


def test_help_article_page_shows_a_markdown_table(client, anonymous_client):
    article_id = _add_article(client, "Rate limits", PRICING, "API")
    html = anonymous_client.get(f"/help/articles/{article_id}").get_data(as_text=True)
    table = re.search(r"<table>.*?</table>", html, re.DOTALL)
    assert table is not None and "Requests per minute" in table.group(0) and "60" in table.group(0)


def _ticket(client, subject: str, email: str | None) -> int:
    body = {"subject": subject, "body": "The invoice total looks wrong this month."}
    response = client.post("/api/tickets", json=body | ({"email": email} if email else {}))
    assert response.status_code == 201, response.get_json()
    return response.get_json()["ticket"]["id"]


def _listed(client, **args: str) -> set[int]:
    response = client.get("/api/tickets", query_string=args | {"per_page": "100"})
    assert response.status_code == 200, response.get_json()
    return {ticket["id"] for ticket in response.get_json()["tickets"]}


def test_ticket_search_finds_a_customer_by_address_in_any_case(client):
    maria = {_ticket(client, "Invoice total", "maria@acme.example"),
             _ticket(client, "Second invoice", "Maria@Acme.example")}
    other = _ticket(client, "Invoice total", "joe@other.example")
    _ticket(client, "Invoice total", None)
    assert _listed(client, q="maria@acme.example") == maria
    assert _listed(client, q="MARIA@ACME.EXAMPLE") == maria
    assert _listed(client, q="@acme.example") == maria
    assert other in _listed(client, q="invoice")  # words still search subject and thread


def test_customer_filter_narrows_the_list_to_one_address(client):
    maria = _ticket(client, "Refund please", "maria@acme.example")
    _ticket(client, "Refund please", "joe@other.example")
    assert _listed(client, customer="Maria@acme.example") == {maria}
    assert _listed(client, customer="maria@acme.example", q="refund") == {maria}
    assert _listed(client, customer="nobody@acme.example") == set()


def test_customer_page_lists_every_ticket_of_one_address(client, admin_client):
    maria = [_ticket(client, "Invoice total", "maria@acme.example"), _ticket(client, "VAT id", "MARIA@acme.example")]
    joe = _ticket(client, "Invoice total", "joe@other.example")
    response = admin_client.get("/admin/inbox/customers/maria@acme.example")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "Tickets from maria@acme.example" in html
    assert all(f'href="/admin/inbox/{ticket_id}"' in html for ticket_id in maria)
    assert f'href="/admin/inbox/{joe}"' not in html
    listing = admin_client.get("/admin/inbox?queue=all").get_data(as_text=True)
    assert 'href="/admin/inbox/customers/joe@other.example"' in listing
