"""Tickets answer from sections: the seed articles' deep sections are found, cited and quoted readably."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import sqlalchemy as sa

from service.knowledge.articles import add_article, get_article, reembed_batch, update_article
from service.retrieval.sql import RetrievalSettings

from .helpers import CountingEmbedder, FailingEmbedder, run_cli

SEED_RESET_EMAIL_SECTION = ("- Check your spam, junk or promotions folder.\n- Make sure you entered the same email "
                            "address you used for your account.\n- Wait a few minutes and try again. Only the most "
                            "recent link will work.")
# (ticket, cited article, cited section): the targets, on the seed knowledge base, offline.
TARGETS = [
    ("My card was declined at checkout", "Payment methods accepted", "Payment declined?"),
    ("I never got the password reset email", "Reset your password", "Didn't get the reset email?"),
    ("My order says delivered but it never arrived", "Track your order", "Marked as delivered but not received?"),
]


@pytest.mark.parametrize(("text", "title", "section"), TARGETS)
def test_seed_tickets_cite_the_section_that_answers_them(client, seeded, text, title, section):
    # As an admin: the scores behind the citation are not part of the public ticket shape.
    response = client.post("/api/tickets", json={"subject": text, "body": text})
    assert response.status_code == 201, response.get_data(as_text=True)
    ticket = response.get_json()["ticket"]
    assert (ticket["status"], ticket["mode"]) == ("answered", "extractive")
    top = ticket["citations"][0]
    assert (top["title"], top["cited"]) == (title, True)
    assert top["section"] == f"{title} › {section}"
    assert top["section_similarity"] == pytest.approx(top["similarity"])  # the section decided
    assert f"section “{section}”" in ticket["answer"]
    assert "## " not in ticket["answer"] and "\n- " not in ticket["answer"]


def test_search_results_name_the_matched_section_with_its_similarity(client, seeded):
    response = client.post("/api/search", json={"query": "the reset email never arrived", "limit": 1})
    [result] = response.get_json()["results"]
    assert result["title"] == "Reset your password"
    assert result["section"] == "Reset your password › Didn't get the reset email?"
    assert result["section_path"] == ["Didn't get the reset email?"]
    assert 0 < result["section_similarity"] <= result["similarity"] + 1e-9
    assert result["snippet"].rstrip("…").split(". ")[0] in SEED_RESET_EMAIL_SECTION


LONG_ARTICLE = {
    "title": "Shipping guide",
    "content": "We ship to 40 countries from our two warehouses, usually within one business day.\n\n"
               "## Customs and duties\n\nOrders outside the EU may owe import duties, paid by the recipient "
               "to the courier on delivery. We cannot estimate them in advance.\n\n"
               "## Lost parcels\n\nIf tracking has not moved for ten days, we open an investigation with the "
               "carrier and send a replacement or refund once it ends.\n",
    "category": "Shipping",
}


def test_editing_one_section_re_embeds_only_that_section(session, local_embedder):
    article = add_article(session, local_embedder, LONG_ARTICLE)
    counting = CountingEmbedder(local_embedder)
    sections = sa.text("SELECT array_to_string(heading_path, '/') || ':' || kind, content_sha256 "
                       "FROM knowledge_sections WHERE article_id = :id AND embedding IS NOT NULL")
    before = dict(session.execute(sections, {"id": article.id}).all())

    edited = LONG_ARTICLE["content"].replace("ten days", "seven days")
    update_article(session, counting, article.id, {"content": edited})

    assert len(counting.texts) == 1
    assert counting.texts[0].startswith("Shipping guide\nLost parcels\n\n") and "seven days" in counting.texts[0]
    after = dict(session.execute(sections, {"id": article.id}).all())
    assert after.keys() == before.keys() == {":text", "Customs and duties:text", "Customs and duties:heading",
                                             "Lost parcels:text", "Lost parcels:heading"}
    assert [key for key in after if after[key] != before[key]] == ["Lost parcels:text"]


def test_unchanged_text_and_importance_changes_embed_nothing(session, local_embedder):
    article = add_article(session, local_embedder, LONG_ARTICLE)
    counting = CountingEmbedder(local_embedder)
    update_article(session, counting, article.id, {"content": LONG_ARTICLE["content"], "importance": 1.7})
    update_article(session, counting, article.id, {"importance": 0.4})
    assert counting.texts == []


def test_a_failing_embedder_stores_sections_as_pending_and_reembed_fills_them(session, local_embedder):
    article = add_article(session, FailingEmbedder(), LONG_ARTICLE)
    assert article.embedding_status == "pending"
    rows = session.execute(sa.text("SELECT count(*), count(embedding) FROM knowledge_sections WHERE article_id = :id"),
                           {"id": article.id}).one()
    assert rows == (5, 0)  # lead, two sections, two headings: all pending
    assert reembed_batch(session, local_embedder, batch_size=10) >= 1
    assert get_article(session, article.id, local_embedder.model_name).embedding_status == "embedded"
    assert session.execute(sa.text("SELECT count(embedding) FROM knowledge_sections WHERE article_id = :id"),
                           {"id": article.id}).scalar_one() == 5


def test_lexical_mode_tickets_are_gated_on_similarity_and_answered(seeded, client):
    seeded.__dict__["retrieval"] = replace(seeded.retrieval, mode="lexical")
    response = client.post("/api/tickets", json={"subject": "Password", "body": "I forgot my password"})
    ticket = response.get_json()["ticket"]
    assert ticket["status"] == "answered", ticket["gate"]
    assert ticket["gate"]["top_similarity"] is not None
    assert ticket["citations"][0]["title"] == "Reset your password"
    assert ticket["citations"][0]["similarity"] is not None


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_every_mode_reports_the_matched_section(seeded, mode):
    from service.retrieval.search import run_search

    with seeded.session() as session:
        outcome = run_search(session, seeded.embedder, "the password reset email never arrived", limit=1,
                             weights=seeded.weights, retrieval=RetrievalSettings(mode=mode))
    [top] = outcome.results
    assert top.title == "Reset your password"
    assert top.section == "Reset your password › Didn't get the reset email?"


def test_ask_in_degraded_mode_prints_citations_without_a_similarity(cli_env, monkeypatch):
    run_cli("seed")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("EMBEDDING_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: the provider is down
    monkeypatch.setenv("EMBEDDING_MAX_RETRIES", "0")
    monkeypatch.setenv("EMBEDDING_MODEL", "text-embedding-3-small")
    result = run_cli("ask", "reset password link", "--subject", "reset password link")
    assert "ticket " in result.stdout
    as_json = json.loads(run_cli("ask", "reset password link", "--json").stdout)
    assert as_json["gate"]["degraded"] == "embedding unavailable"
