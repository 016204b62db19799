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
