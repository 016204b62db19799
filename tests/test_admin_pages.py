"""Server-rendered admin pages through Flask's test client, logged in through the real login form."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
import sqlalchemy as sa

from service.web.admin.pages import importance_badge

from .admin_helpers import csrf_from
from .conftest import set_retrieval_mode


def new_article(client, **fields) -> dict[str, Any]:
    """Create an article through the JSON API (the authenticated ``client``)."""
    payload = {"title": "Gift card balance", "content": "Check your balance under Account > Gift cards.",
               "category": "Billing", **fields}
    response = client.post("/api/articles", json=payload)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["article"]


def page(client, path: str, status: int = 200) -> str:
    """GET an admin page and return its HTML."""
    response = client.get(path)
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    return response.get_data(as_text=True)


class FormControls(HTMLParser):
    """Collects form controls, labels and the text of flash messages."""

    def __init__(self) -> None:
        super().__init__()
        self.controls: list[dict[str, str | None]] = []
        self.label_targets: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "label" and attributes.get("for"):
            self.label_targets.add(attributes["for"])
        if tag in ("input", "select", "textarea") and attributes.get("type") not in ("hidden", "submit"):
            self.controls.append(attributes)


def unlabelled_controls(html: str) -> list[dict[str, str | None]]:
    """Controls with neither a <label for=…> nor an aria-label."""
    parser = FormControls()
    parser.feed(html)
    return [c for c in parser.controls if c.get("id") not in parser.label_targets and not c.get("aria-label")]


@pytest.mark.parametrize("importance, badge", [(2.0, "critical"), (1.5, "critical"), (1.2, "boosted"),
                                               (1.0, "normal"), (0.5, "lowered"), (0.2, "buried"), (0.0, "buried")])
def test_importance_badge_thresholds(importance, badge):
    assert importance_badge(importance)[1] == badge


def test_articles_list_shows_importance_badge_embedding_status_and_dates(admin_client, client, runtime):
    critical = new_article(client, title="Outage status page", importance=1.8, category="Status")
    new_article(client, title="Plain article", importance=1.0)
    with runtime.session() as session:  # a row the embedder never reached
        session.execute(sa.text("INSERT INTO knowledge_base (title, content, category) "
                                "VALUES ('Pending one', 'not embedded yet', 'Billing')"))
    html = page(admin_client, "/admin/articles")
    assert f'href="/admin/articles/{critical["id"]}">Outage status page</a>' in html
    assert 'badge-critical">critical' in html and "1.8" in html
    assert 'class="status status-embedded"' in html and 'class="status status-pending"' in html
    assert critical["created_at"][:10] in html
    assert "3 articles" in html


def test_articles_list_filters_by_text_and_category_and_paginates(admin_client, client):
    for n in range(23):
        new_article(client, title=f"Shipping rule {n}", content=f"Parcels of size {n}.", category="Shipping")
    new_article(client, title="Refund window", content="Refunds within 30 days, 100% guaranteed.",
                category="Billing")
    first = page(admin_client, "/admin/articles?category=Shipping")
    assert "23 articles" in first and "Page 1 of 2" in first and "Refund window" not in first
    second = page(admin_client, "/admin/articles?category=Shipping&page=2")
    assert second.count('data-label="Title"') == 3
    assert 'rel="prev"' in second
    found = page(admin_client, "/admin/articles?q=refunds+within")
    assert "1 article " in found and "Refund window" in found
    # LIKE wildcards in the search box are taken literally.
    assert "Refund window" in page(admin_client, "/admin/articles?q=100%25")
    assert "0 articles" in page(admin_client, "/admin/articles?q=_%25_zzz")


def test_article_page_has_a_labelled_keyboard_slider_and_links_to_its_tickets(admin_client, client):
    article = new_article(client, importance=1.2)
    html = page(admin_client, f"/admin/articles/{article['id']}")
    assert ('<input type="range" id="importance" min="0" max="2" step="0.1"\n'
            '               value="1.2"') in html
    assert '<label for="importance"' in html
    assert f'href="/admin/tickets?article_id={article["id"]}">0 tickets retrieved this article' in html
    assert 'name="csrf-token"' in html
    assert unlabelled_controls(html) == []


@pytest.mark.parametrize("path", ["/admin/articles", "/admin/articles/new", "/admin/preview", "/admin/tickets",
                                  "/admin/login"])
def test_every_form_control_has_a_label(admin_client, path):
    assert unlabelled_controls(page(admin_client, path)) == []


def test_editing_an_article_saves_and_reembeds_changed_text(admin_client, client):
    article = new_article(client)
    html = page(admin_client, f"/admin/articles/{article['id']}")
    response = admin_client.post(f"/admin/articles/{article['id']}", data={
        "csrf_token": csrf_from(html), "title": "Gift card balance and expiry",
        "content": "Gift cards never expire.", "category": "Billing"})
    assert (response.status_code, response.headers["Location"]) == (302, f"/admin/articles/{article['id']}")
    stored = client.get(f"/api/articles/{article['id']}").get_json()["article"]
    assert (stored["title"], stored["content"], stored["embedding_status"]) == (
        "Gift card balance and expiry", "Gift cards never expire.", "embedded")
    assert "Changes saved." in page(admin_client, f"/admin/articles/{article['id']}")


def test_invalid_edit_is_shown_next_to_the_field_and_changes_nothing(admin_client, client):
    article = new_article(client)
    html = page(admin_client, f"/admin/articles/{article['id']}")
    response = admin_client.post(f"/admin/articles/{article['id']}", data={
        "csrf_token": csrf_from(html), "title": "  ", "content": "still here", "category": ""})
    assert response.status_code == 400
    body = response.get_data(as_text=True)
    assert 'aria-invalid="true" aria-describedby="title-error"' in body
    assert "Title must not be empty." in body and "Not saved: invalid article." in body
    assert client.get(f"/api/articles/{article['id']}").get_json()["article"]["title"] == article["title"]


def test_new_article_form_creates_an_embedded_article(admin_client, client):
    html = page(admin_client, "/admin/articles/new")
    response = admin_client.post("/admin/articles/new", data={
        "csrf_token": csrf_from(html), "title": "Change your email address",
        "content": "Open Account > Profile and edit the email field.", "category": "Account", "importance": "1.6"})
    assert response.status_code == 302
    article_id = int(response.headers["Location"].rsplit("/", 1)[1])
    stored = client.get(f"/api/articles/{article_id}").get_json()["article"]
    assert (stored["title"], stored["importance"], stored["embedding_status"]) == (
        "Change your email address", 1.6, "embedded")


@pytest.mark.parametrize("importance", ["2.5", "NaN", "lots"])
def test_new_article_with_bad_importance_is_refused(admin_client, client, importance):
    html = page(admin_client, "/admin/articles/new")
    response = admin_client.post("/admin/articles/new", data={
        "csrf_token": csrf_from(html), "title": "T", "content": "C", "category": "", "importance": importance})
    assert response.status_code == 400
    assert "Importance must" in response.get_data(as_text=True)
    assert client.get("/api/articles").get_json()["total"] == 0


def test_delete_with_csrf_removes_the_article(admin_client, client):
    article = new_article(client)
    html = page(admin_client, f"/admin/articles/{article['id']}")
    assert 'data-confirm="Delete “Gift card balance”? This cannot be undone."' in html
    response = admin_client.post(f"/admin/articles/{article['id']}/delete", data={"csrf_token": csrf_from(html)})
    assert (response.status_code, response.headers["Location"]) == (302, "/admin/articles")
    assert client.get(f"/api/articles/{article['id']}").status_code == 404
    assert "Deleted “Gift card balance”." in page(admin_client, "/admin/articles")


def test_reembed_now_embeds_a_pending_article(admin_client, client, runtime):
    with runtime.session() as session:
        article_id = session.execute(sa.text(
            "INSERT INTO knowledge_base (title, content) VALUES ('Pending', 'Needs a vector.') RETURNING id"
        )).scalar_one()
    html = page(admin_client, f"/admin/articles/{article_id}")
    assert 'status-pending">pending' in html
    admin_client.post(f"/admin/articles/{article_id}/reembed", data={"csrf_token": csrf_from(html)})
    assert client.get(f"/api/articles/{article_id}").get_json()["article"]["embedding_status"] == "embedded"
    assert "Re-embedded with local:all-MiniLM-L6-v2." in page(admin_client, f"/admin/articles/{article_id}")
    admin_client.post(f"/admin/articles/{article_id}/reembed", data={"csrf_token": csrf_from(html)})
    assert "nothing to do" in page(admin_client, f"/admin/articles/{article_id}")


def test_missing_article_page_is_an_html_404(admin_client):
    response = admin_client.get("/admin/articles/999999999")
    assert response.status_code == 404 and response.mimetype == "text/html"
    assert "That article does not exist." in response.get_data(as_text=True)


def test_admin_pages_send_security_headers(admin_client):
    response = admin_client.get("/admin/articles")
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"


def test_login_page_explains_how_to_create_the_first_admin(anonymous_client):
    assert "supportrag admin create --username NAME" in page(anonymous_client, "/admin/login")


def test_tickets_page_lists_tickets_and_filters_by_cited_article(admin_client, client, seeded):
    password = client.post("/api/tickets", json={"subject": "Locked out", "body": "I forgot my password",
                                                 "email": "ann@example.com"}).get_json()["ticket"]
    client.post("/api/tickets", json={"subject": "Refund", "body": "How do I get my money back?"})
    client.post(f"/api/tickets/{password['id']}/feedback", json={"helpful": True})
    html = page(admin_client, "/admin/tickets")
    assert "2 tickets" in html and "ann@example.com" in html and "1 helpful, 0 not" in html
    top = password["citations"][0]
    assert f'href="/admin/articles/{top["article_id"]}">{top["title"]}</a>' in html
    only = page(admin_client, f"/admin/tickets?article_id={top['article_id']}")
    assert "Locked out" in only and "Tickets that retrieved" in only
    detail = page(admin_client, f"/admin/tickets/{password['id']}")
    assert "I forgot my password" in detail and f"{top['score']:.4f}" in detail
    article_page = page(admin_client, f"/admin/articles/{top['article_id']}")
    assert "ticket" in article_page and f"/admin/tickets?article_id={top['article_id']}" in article_page


# --- the ranking preview endpoint ----------------------------------------------------------------

def preview(client, **body) -> dict[str, Any]:
    """POST /api/admin/preview."""
    response = client.post("/api/admin/preview", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_preview_matches_search_and_gives_the_breakdown_of_an_article_outside_the_top(client, seeded, vector_mode):
    articles = {a["title"]: a for a in client.get("/api/articles").get_json()["articles"]}
    website = articles["Website not loading"]
    data = preview(client, query="I forgot my password", limit=2, article_id=website["id"])
    search = client.post("/api/search", json={"query": "I forgot my password", "limit": 2}).get_json()
    assert [r["id"] for r in data["results"]] == [r["id"] for r in search["results"]]
    assert [r["rank"] for r in data["results"]] == [1, 2]
    assert data["weights"] == search["weights"] and data["limit"] == 2 and data["mode"] == search["mode"]
    outside = data["article"]
    assert outside["id"] == website["id"] and outside["rank"] is None
    assert outside["score"] == pytest.approx(outside["relevance"] * 0.8 + outside["recency"] * 0.2 * 1.0, abs=1e-12)
    assert outside["score"] < data["results"][-1]["score"]
    wide = client.post("/api/search", json={"query": "I forgot my password", "limit": 5}).get_json()["results"]
    assert outside["score"] == pytest.approx(next(r["score"] for r in wide if r["id"] == website["id"]), abs=1e-6)


def test_in_hybrid_mode_the_breakdown_outside_the_top_is_the_articles_place_in_a_longer_page(client, seeded,
                                                                                          hybrid_mode):
    articles = {a["title"]: a for a in client.get("/api/articles").get_json()["articles"]}
    website = articles["Website not loading"]
    data = preview(client, query="I forgot my password", limit=2, article_id=website["id"])
    assert data["mode"] == "hybrid" and website["id"] not in [r["id"] for r in data["results"]]
    wide = client.post("/api/search", json={"query": "I forgot my password", "limit": 5}).get_json()["results"]
    outside = data["article"]
    assert outside["rank"] == 1 + [r["id"] for r in wide].index(website["id"]) > 2
    same = next(r for r in wide if r["id"] == website["id"])
    assert (outside["relevance"], outside["score"]) == (pytest.approx(same["relevance"]), pytest.approx(same["score"]))
    assert outside["note"] == "outside the top results"


def test_preview_what_if_formula_predicts_the_score_after_saving(client, seeded):
    target = next(a for a in client.get("/api/articles").get_json()["articles"] if a["title"] == "Track your order")
    before = preview(client, query="I forgot my password", limit=5, article_id=target["id"])["article"]
    predicted = before["relevance"] * 0.8 + before["recency"] * 0.2 * 1.8  # what admin.js computes
    assert client.patch(f"/api/articles/{target['id']}", json={"importance": 1.8}).status_code == 200
    after = preview(client, query="I forgot my password", limit=5, article_id=target["id"])["article"]
    assert after["importance"] == 1.8
    assert after["score"] == pytest.approx(predicted, abs=1e-6)


@pytest.mark.parametrize("body, field", [({"query": ""}, "query"), ({"query": "x", "limit": 0}, "limit"),
                                         ({"query": "x", "article_id": "4"}, "article_id")])
def test_invalid_preview_is_400_naming_the_field(client, body, field):
    response = client.post("/api/admin/preview", json=body)
    assert response.status_code == 400
    assert field in response.get_json()["error"]["details"]


def test_preview_for_a_pending_article_says_search_never_returns_it(client, runtime, seeded):
    with runtime.session() as session:
        article_id = session.execute(sa.text(
            "INSERT INTO knowledge_base (title, content) VALUES ('Pending', 'No vector.') RETURNING id")).scalar_one()
    article = preview(client, query="password", article_id=article_id)["article"]
    assert article["score"] is None and "not embedded" in article["note"]


def test_article_page_lists_its_sections_with_their_embedding_status(admin_client, client, seeded):
    reset = next(a for a in client.get("/api/articles").get_json()["articles"] if a["title"] == "Reset your password")
    html = page(admin_client, f"/admin/articles/{reset['id']}")
    assert "Didn&#39;t get the reset email?" in html and "(lead)" in html and "(heading)" in html
    assert html.count('<span class="status status-embedded">embedded</span>') >= 9  # lead, 4 sections, 4 headings
    assert "status-pending" not in html


def test_preview_names_the_matched_section_inside_and_outside_the_top(client, seeded, vector_mode):
    articles = {a["title"]: a for a in client.get("/api/articles").get_json()["articles"]}
    data = preview(client, query="my card was declined", limit=1, article_id=articles["Reset your password"]["id"])
    assert data["results"][0]["section"] == "Payment methods accepted › Payment declined?"
    outside = data["article"]
    assert outside["rank"] is None and outside["section"].startswith("Reset your password › ")
    wide = client.post("/api/search", json={"query": "my card was declined", "limit": 5}).get_json()["results"]
    same = next(r for r in wide if r["id"] == outside["id"])
    assert (outside["section"], outside["score"]) == (same["section"], pytest.approx(same["score"], abs=1e-6))


@pytest.mark.parametrize("mode, named", [("vector", "similarity"), ("hybrid", "fused relevance"),
                                         ("lexical", "lexical relevance")])
def test_the_preview_page_and_its_data_state_the_formula_of_the_configured_mode(admin_client, client, seeded,
                                                                                runtime, mode, named):
    set_retrieval_mode(runtime, mode)
    formula = f"score = 0.8 × {named} + 0.2 × recency × importance"
    assert formula in page(admin_client, "/admin/preview")
    data = preview(client, query="I forgot my password", limit=3)
    assert data["mode"] == mode and data["formula"] == formula
    for result in data["results"]:
        assert result["relevance_kind"] == named
        assert result["score"] == pytest.approx(
            0.8 * result["relevance"] + 0.2 * result["recency"] * result["importance"], abs=1e-12)
