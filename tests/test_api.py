"""The HTTP API (service/api.py) and its one error shape (service/errors.py), on a real Postgres."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterator

import numpy as np
import pytest
import sqlalchemy as sa
from flask import g
from flask.testing import FlaskClient

import service.retrieval.search
from service.config import Settings
from service.db.models import Article
from service.providers.embeddings import OpenAIEmbedder
from service.runtime import Runtime
from service.web.app import create_app

from .conftest import bearer_environ
from .helpers import CountingEmbedder, assert_error

LOCAL_MODEL = "local:all-MiniLM-L6-v2"
MISSING_ID = 999_999_999


# --- helpers -------------------------------------------------------------------------------------



def create_article(client: FlaskClient, **fields: Any) -> dict[str, Any]:
    """POST an article and return its JSON form."""
    payload = {"title": "Sample article", "content": "Some helpful content.", **fields}
    response = client.post("/api/articles", json=payload)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["article"]


def stored_snapshot(client: FlaskClient) -> dict[str, Any]:
    """Everything an API user can see stored: every article and the counts."""
    listing = client.get("/api/articles?per_page=100").get_json()
    return {"articles": listing["articles"], "total": listing["total"], "stats": client.get("/api/stats").get_json()}


def search(client: FlaskClient, query: str, **extra: Any) -> list[dict[str, Any]]:
    """POST /api/search and return the results."""
    response = client.post("/api/search", json={"query": query, **extra})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["results"]




def freeze_search_clock(monkeypatch, frozen: datetime) -> None:
    """Make search compute recency at ``frozen``, so two searches see the same recency exactly."""

    class FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen

    monkeypatch.setattr(service.retrieval.search, "datetime", FrozenDatetime)


# --- the error shape, for every status ---------------------------------------------------------

LONG_CONTENT = "a" * 100_001

ERROR_CASES = [
    # (id, method, path, request kwargs, status, code, details key or None)
    ("empty-title", "post", "/api/articles", {"json": {"title": "", "content": "c"}},
     400, "validation_error", "title"),
    ("blank-title", "post", "/api/articles", {"json": {"title": "   \n", "content": "c"}},
     400, "validation_error", "title"),
    ("title-301-chars", "post", "/api/articles", {"json": {"title": "t" * 301, "content": "c"}},
     400, "validation_error", "title"),
    ("title-not-string", "post", "/api/articles", {"json": {"title": 12, "content": "c"}},
     400, "validation_error", "title"),
    ("title-with-nul", "post", "/api/articles", {"json": {"title": "bad\u0000title", "content": "c"}},
     400, "validation_error", "title"),
    ("content-with-nul", "post", "/api/articles", {"json": {"title": "t", "content": "bad\u0000body"}},
     400, "validation_error", "content"),
    ("category-with-nul", "post", "/api/articles", {"json": {"title": "t", "content": "c", "category": "a\u0000"}},
     400, "validation_error", "category"),
    ("missing-content", "post", "/api/articles", {"json": {"title": "t"}},
     400, "validation_error", "content"),
    ("content-over-100000", "post", "/api/articles", {"json": {"title": "t", "content": LONG_CONTENT}},
     400, "validation_error", "content"),
    ("category-65-chars", "post", "/api/articles", {"json": {"title": "t", "content": "c", "category": "x" * 65}},
     400, "validation_error", "category"),
    ("importance-2.5", "post", "/api/articles", {"json": {"title": "t", "content": "c", "importance": 2.5}},
     400, "validation_error", "importance"),
    ("importance-negative", "post", "/api/articles", {"json": {"title": "t", "content": "c", "importance": -0.1}},
     400, "validation_error", "importance"),
    ("importance-string-NaN", "post", "/api/articles",
     {"json": {"title": "t", "content": "c", "importance": "NaN"}}, 400, "validation_error", "importance"),
    ("importance-string-Infinity", "post", "/api/articles",
     {"json": {"title": "t", "content": "c", "importance": "Infinity"}}, 400, "validation_error", "importance"),
    ("importance-numeric-string", "post", "/api/articles",
     {"json": {"title": "t", "content": "c", "importance": "1.5"}}, 400, "validation_error", "importance"),
    ("importance-bool", "post", "/api/articles", {"json": {"title": "t", "content": "c", "importance": True}},
     400, "validation_error", "importance"),
    ("importance-null", "post", "/api/articles", {"json": {"title": "t", "content": "c", "importance": None}},
     400, "validation_error", "importance"),
    # Python's json module accepts the non-standard NaN / Infinity literals; they must still be refused.
    ("importance-json-NaN-literal", "post", "/api/articles",
     {"data": '{"title": "t", "content": "c", "importance": NaN}', "content_type": "application/json"},
     400, "validation_error", "importance"),
    ("importance-json-Infinity-literal", "post", "/api/articles",
     {"data": '{"title": "t", "content": "c", "importance": Infinity}', "content_type": "application/json"},
     400, "validation_error", "importance"),
    ("unknown-field", "post", "/api/articles", {"json": {"title": "t", "content": "c", "tags": ["x"]}},
     400, "validation_error", "tags"),
    ("invalid-json", "post", "/api/articles", {"data": '{"title": "t",', "content_type": "application/json"},
     400, "invalid_json", None),
    ("json-array-body", "post", "/api/articles", {"json": [{"title": "t", "content": "c"}]},
     400, "invalid_json", None),
    ("text-plain-body", "post", "/api/articles", {"data": "title=t", "content_type": "text/plain"},
     415, "unsupported_media_type", None),
    ("no-body", "post", "/api/articles", {}, 415, "unsupported_media_type", None),
    ("patch-importance-2.5", "patch", "/api/articles/{id}", {"json": {"importance": 2.5}},
     400, "validation_error", "importance"),
    ("patch-empty-title", "patch", "/api/articles/{id}", {"json": {"title": ""}},
     400, "validation_error", "title"),
    ("patch-content-over-100000", "patch", "/api/articles/{id}", {"json": {"content": LONG_CONTENT}},
     400, "validation_error", "content"),
    ("patch-title-with-nul", "patch", "/api/articles/{id}", {"json": {"title": "x\u0000"}},
     400, "validation_error", "title"),
    ("patch-unknown-field", "patch", "/api/articles/{id}", {"json": {"id": 1, "importance": 1.2}},
     400, "validation_error", "id"),
    ("patch-invalid-json", "patch", "/api/articles/{id}", {"data": "{", "content_type": "application/json"},
     400, "invalid_json", None),
    ("patch-text-plain", "patch", "/api/articles/{id}", {"data": "importance=2", "content_type": "text/plain"},
     415, "unsupported_media_type", None),
    ("page-0", "get", "/api/articles?page=0", {}, 400, "validation_error", "page"),
    ("page-not-integer", "get", "/api/articles?page=two", {}, 400, "validation_error", "page"),
    ("per-page-0", "get", "/api/articles?per_page=0", {}, 400, "validation_error", "per_page"),
    ("per-page-101", "get", "/api/articles?per_page=101", {}, 400, "validation_error", "per_page"),
    ("per-page-fraction", "get", "/api/articles?per_page=1.5", {}, 400, "validation_error", "per_page"),
    ("search-empty-query", "post", "/api/search", {"json": {"query": "  "}}, 400, "validation_error", "query"),
    ("search-missing-query", "post", "/api/search", {"json": {"limit": 3}}, 400, "validation_error", "query"),
    ("search-limit-0", "post", "/api/search", {"json": {"query": "refund", "limit": 0}},
     400, "validation_error", "limit"),
    ("search-limit-51", "post", "/api/search", {"json": {"query": "refund", "limit": 51}},
     400, "validation_error", "limit"),
    ("search-limit-string", "post", "/api/search", {"json": {"query": "refund", "limit": "3"}},
     400, "validation_error", "limit"),
    ("search-limit-bool", "post", "/api/search", {"json": {"query": "refund", "limit": True}},
     400, "validation_error", "limit"),
    ("search-text-plain", "post", "/api/search", {"data": "refund", "content_type": "text/plain"},
     415, "unsupported_media_type", None),
    ("get-missing-article", "get", f"/api/articles/{MISSING_ID}", {}, 404, "not_found", "id"),
    ("get-id-beyond-bigint", "get", "/api/articles/99999999999999999999", {}, 404, "not_found", None),
    ("patch-id-beyond-bigint", "patch", "/api/articles/99999999999999999999", {"json": {"importance": 1.0}},
     404, "not_found", None),
    ("delete-id-beyond-bigint", "delete", "/api/articles/99999999999999999999", {}, 404, "not_found", None),
    ("patch-missing-article", "patch", f"/api/articles/{MISSING_ID}", {"json": {"importance": 1.0}},
     404, "not_found", "id"),
    ("delete-missing-article", "delete", f"/api/articles/{MISSING_ID}", {}, 404, "not_found", "id"),
    ("unknown-route", "get", "/api/nope", {}, 404, "not_found", None),
    ("non-integer-article-id", "get", "/api/articles/abc", {}, 404, "not_found", None),
    ("put-article", "put", "/api/articles/{id}", {"json": {"title": "t", "content": "c"}},
     405, "method_not_allowed", None),
    ("delete-collection", "delete", "/api/articles", {}, 405, "method_not_allowed", None),
    ("get-search", "get", "/api/search", {}, 405, "method_not_allowed", None),
]


@pytest.fixture
def existing_article(client) -> dict[str, Any]:
    """One stored article that failing requests must leave alone."""
    return create_article(client, title="Existing article", content="Existing content.",
                          category="Billing", importance=1.2)


@pytest.mark.parametrize("method, path, kwargs, status, code, detail",
                         [case[1:] for case in ERROR_CASES], ids=[case[0] for case in ERROR_CASES])
def test_failing_request_answers_in_error_shape_and_changes_nothing(
        client, existing_article, method, path, kwargs, status, code, detail):
    before = stored_snapshot(client)
    response = getattr(client, method)(path.format(id=existing_article["id"]), **kwargs)
    error = assert_error(response, status, code)
    if detail is not None:
        assert detail in error["details"]
    assert stored_snapshot(client) == before


def test_method_not_allowed_lists_allowed_methods_in_allow_header(client, existing_article):
    response = client.put(f"/api/articles/{existing_article['id']}", json={"importance": 1.0})
    assert_error(response, 405, "method_not_allowed")
    allowed = {method.strip() for method in response.headers["Allow"].split(",")}
    assert {"GET", "PATCH", "DELETE"} <= allowed
    assert "PUT" not in allowed and "POST" not in allowed


def test_body_over_max_content_length_is_413_in_error_shape_and_stores_nothing(client, existing_article):
    client.application.config["MAX_CONTENT_LENGTH"] = 1000
    before = stored_snapshot(client)
    response = client.post("/api/articles", json={"title": "Too big", "content": "x" * 2000})
    assert_error(response, 413, "request_entity_too_large")
    response = client.patch(f"/api/articles/{existing_article['id']}", json={"content": "y" * 2000})
    assert_error(response, 413, "request_entity_too_large")
    assert stored_snapshot(client) == before
    # A body under the limit is still accepted.
    assert client.post("/api/articles", json={"title": "Small", "content": "fits"}).status_code == 201


def test_unexpected_exception_is_500_in_error_shape_and_rolls_back_the_request_session(app, client):
    from service.web.requests import db

    @app.get("/boom")
    def boom():
        db().add(Article(title="Half-written", content="never committed"))
        db().flush()
        raise RuntimeError("secret internals")

    before = stored_snapshot(client)
    error = assert_error(client.get("/boom"), 500, "internal_error")
    assert "secret internals" not in error["message"]
    assert stored_snapshot(client) == before


# --- CRUD ----------------------------------------------------------------------------------------

def test_create_article_returns_201_location_and_embedded_article(client):
    response = client.post("/api/articles", json={
        "title": "  Gift card balance  ", "content": "Check your gift card balance on the account page.",
        "category": "Billing", "importance": 1.5,
    })
    assert response.status_code == 201
    article = response.get_json()["article"]
    assert response.headers["Location"].endswith(f"/api/articles/{article['id']}")
    assert article["title"] == "Gift card balance"  # surrounding whitespace is not stored
    assert article["content"] == "Check your gift card balance on the account page."
    assert article["category"] == "Billing"
    assert article["importance"] == 1.5
    assert article["embedding_status"] == "embedded"
    assert article["embedding_model"] == LOCAL_MODEL
    assert article["embedding_error"] is None
    assert datetime.fromisoformat(article["created_at"]).tzinfo is not None

    shown = client.get(response.headers["Location"])
    assert shown.status_code == 200
    assert shown.get_json()["article"] == article


def test_create_article_defaults_importance_to_1_and_category_to_null(client):
    article = create_article(client, title="Plain", content="No category given.")
    assert article["importance"] == 1.0
    assert article["category"] is None
    assert create_article(client, title="Blank category", content="c", category="  ")["category"] is None


def test_list_articles_is_newest_first_paginated_and_filtered_by_category(client, runtime):
    ids = [create_article(client, title=f"Paged {n}", content=f"Body {n}.", category="Paging")["id"]
           for n in range(5)]
    other = create_article(client, title="Elsewhere", content="Other body.", category="Other")["id"]
    # Make the oldest-id article the newest by time, so order follows created_at, not id.
    with client.application.extensions["supportrag"].session() as session:
        session.execute(sa.text("UPDATE knowledge_base SET created_at = created_at + interval '1 hour' "
                                "WHERE id = :id"), {"id": ids[0]})
    newest_first = [ids[0], ids[4], ids[3], ids[2], ids[1]]

    def page(query: str) -> dict[str, Any]:
        response = client.get(f"/api/articles?{query}")
        assert response.status_code == 200
        return response.get_json()

    first = page("category=Paging&per_page=2")
    assert (first["page"], first["per_page"], first["total"], first["pages"]) == (1, 2, 5, 3)
    assert [a["id"] for a in first["articles"]] == newest_first[:2]
    assert [a["id"] for a in page("category=Paging&per_page=2&page=2")["articles"]] == newest_first[2:4]
    assert [a["id"] for a in page("category=Paging&per_page=2&page=3")["articles"]] == newest_first[4:]
    beyond = page("category=Paging&per_page=2&page=4")
    assert beyond["articles"] == [] and beyond["total"] == 5

    everything = page("")
    assert (everything["page"], everything["per_page"], everything["total"], everything["pages"]) == (1, 20, 6, 1)
    assert {a["id"] for a in everything["articles"]} == {*ids, other}
    only_other = page("category=Other")
    assert [a["id"] for a in only_other["articles"]] == [other]
    assert page("category=Nothing-here") == {"articles": [], "page": 1, "per_page": 20, "total": 0, "pages": 0}


@pytest.fixture
def counting_embedder(runtime, monkeypatch) -> CountingEmbedder:
    """The runtime's real embedder, wrapped to count calls."""
    counting = CountingEmbedder(runtime.embedder)
    monkeypatch.setattr(runtime, "_embedder", counting)
    return counting


def stored_vector(runtime: Runtime, article_id: int) -> np.ndarray:
    """The article's stored embedding, read straight from the table."""
    with runtime.session() as session:
        return session.execute(sa.select(Article.embedding).where(Article.id == article_id)).scalar_one()


def test_patch_importance_changes_only_importance_and_does_not_reembed(client, runtime, counting_embedder):
    article = create_article(client, title="Importance only", content="Text that stays.", category="Account")
    vector_before = stored_vector(runtime, article["id"])
    calls_before = len(counting_embedder.calls)

    response = client.patch(f"/api/articles/{article['id']}", json={"importance": 1.8})
    assert response.status_code == 200
    patched = response.get_json()["article"]
    assert patched["importance"] == 1.8
    assert len(counting_embedder.calls) == calls_before  # no provider call for an importance change
    unchanged_fields = ("id", "title", "content", "category", "created_at", "embedding_model", "embedding_status")
    assert {k: patched[k] for k in unchanged_fields} == {k: article[k] for k in unchanged_fields}
    assert np.array_equal(stored_vector(runtime, article["id"]), vector_before)
    assert client.get(f"/api/articles/{article['id']}").get_json()["article"]["importance"] == 1.8


@pytest.mark.parametrize("change", [
    {"title": "Renamed: exchanging a damaged item"},
    {"content": "Send the damaged item back with the prepaid label and we ship a replacement."},
])
def test_patch_title_or_content_reembeds_and_moves_updated_at_forward(client, runtime, counting_embedder, change):
    article = create_article(client, title="Original title", content="Original content about something.")
    vector_before = stored_vector(runtime, article["id"])
    calls_before = len(counting_embedder.calls)

    response = client.patch(f"/api/articles/{article['id']}", json=change)
    assert response.status_code == 200
    patched = response.get_json()["article"]
    assert {k: patched[k] for k in change} == change
    assert patched["embedding_status"] == "embedded"
    assert patched["embedding_model"] == LOCAL_MODEL
    assert patched["embedding_error"] is None
    assert len(counting_embedder.calls) == calls_before + 1
    assert not np.array_equal(stored_vector(runtime, article["id"]), vector_before)
    assert patched["created_at"] == article["created_at"]
    assert datetime.fromisoformat(patched["updated_at"]) > datetime.fromisoformat(article["updated_at"])
    assert client.get(f"/api/articles/{article['id']}").get_json()["article"] == patched


def test_patch_with_same_text_does_not_reembed(client, counting_embedder):
    article = create_article(client, title="Same text", content="Unchanged body.")
    calls_before = len(counting_embedder.calls)
    response = client.patch(f"/api/articles/{article['id']}", json={"title": "Same text", "content": "Unchanged body."})
    assert response.status_code == 200
    assert response.get_json()["article"]["embedding_status"] == "embedded"
    assert len(counting_embedder.calls) == calls_before


def test_delete_article_returns_204_then_404(client):
    article = create_article(client, title="Short-lived", content="Soon gone.")
    response = client.delete(f"/api/articles/{article['id']}")
    assert response.status_code == 204
    assert response.get_data() == b""
    assert_error(client.get(f"/api/articles/{article['id']}"), 404, "not_found")
    assert_error(client.delete(f"/api/articles/{article['id']}"), 404, "not_found")
    assert client.get("/api/articles").get_json()["total"] == 0


# --- search --------------------------------------------------------------------------------------

TRADE_IN = {
    "title": "Trade in your old laptop for store credit",
    "content": "Bring your used laptop or tablet to our trade-in program. We inspect the device and give you "
               "store credit based on its condition, which you can spend on a new computer.",
    "category": "Returns",
    "importance": 1.0,
}
TRADE_IN_QUESTION = "Can I exchange my old laptop for store credit?"


def test_new_article_is_found_first_and_importance_moves_score_by_exactly_the_recency_term(
        client, seeded, monkeypatch):
    article = create_article(client, **TRADE_IN)
    # Search 73 days after creation: recency is 1 - 73/365 = 0.8 for both searches.
    freeze_search_clock(monkeypatch, datetime.fromisoformat(article["created_at"]) + timedelta(days=73))

    before = search(client, TRADE_IN_QUESTION)
    assert before[0]["id"] == article["id"]
    assert before[0]["recency"] == pytest.approx(0.8, abs=1e-12)

    response = client.patch(f"/api/articles/{article['id']}", json={"importance": 1.8})
    assert response.status_code == 200
    after = search(client, TRADE_IN_QUESTION)
    assert after[0]["id"] == article["id"]

    old, new = before[0], after[0]
    assert (old["importance"], new["importance"]) == (1.0, 1.8)
    assert new["similarity"] == pytest.approx(old["similarity"], abs=1e-9)
    assert new["recency"] == old["recency"]
    assert new["score"] - old["score"] == pytest.approx(0.2 * new["recency"] * (1.8 - 1.0), abs=1e-9)
    assert new["score"] - old["score"] == pytest.approx(0.128, abs=1e-9)


def test_by_default_every_result_follows_the_cards_formula_on_its_cosine_similarity(client, seeded):
    body = client.post("/api/search", json={"query": "Where is my parcel?", "limit": 5}).get_json()
    assert body["query"] == "Where is my parcel?"
    assert body["model"] == LOCAL_MODEL
    assert body["weights"] == {"similarity_weight": 0.8, "recency_weight": 0.2, "recency_window_days": 365.0}
    assert body["mode"] == "vector"
    assert body["formula"] == "score = 0.8 × similarity + 0.2 × recency × importance"
    results = body["results"]
    assert len(results) == 5
    for result in results:
        assert {"id", "title", "category", "snippet", "similarity", "recency", "importance", "score"} <= set(result)
        assert isinstance(result["snippet"], str) and result["snippet"]
        assert -1.0 <= result["similarity"] <= 1.0
        assert 0.0 <= result["recency"] <= 1.0
        assert result["relevance_kind"] == "similarity" and result["relevance"] == result["similarity"]
        # The card's formula, by hand, from the fields the result shows.
        assert result["score"] == pytest.approx(
            0.8 * result["similarity"] + 0.2 * result["recency"] * result["importance"], abs=1e-12)
    scores = [result["score"] for result in results]
    assert scores == sorted(scores, reverse=True)


def test_in_hybrid_mode_results_name_the_fused_relevance_that_replaces_similarity(client, seeded, hybrid_mode):
    body = client.post("/api/search", json={"query": "Where is my parcel?", "limit": 5}).get_json()
    assert body["mode"] == "hybrid"
    assert body["formula"] == "score = 0.8 × fused relevance + 0.2 × recency × importance"
    for result in body["results"]:
        assert result["relevance_kind"] == "fused relevance" and 0.0 <= result["relevance"] <= 1.0
        assert result["score"] == pytest.approx(
            0.8 * result["relevance"] + 0.2 * result["recency"] * result["importance"], abs=1e-12)
    assert any(result["relevance"] != pytest.approx(result["similarity"]) for result in body["results"])


@pytest.mark.parametrize("question, expected_title", [
    ("I forgot my password", "Reset your password"),
    ("How do I get my money back?", "How to request a refund"),
])
def test_seeded_question_ranks_the_matching_article_first(client, seeded, question, expected_title):
    assert search(client, question)[0]["title"] == expected_title


def test_search_returns_at_most_limit_results(client, seeded):
    # One seeding for every limit: seeding embeds five long articles.
    for limit, expected in [(None, 3), (1, 1), (2, 2), (5, 5), (50, 5)]:
        extra = {} if limit is None else {"limit": limit}
        assert len(search(client, "help with my order", **extra)) == expected, limit


def test_search_on_empty_knowledge_base_returns_no_results(client):
    assert search(client, "anything at all") == []


# --- stats and health ----------------------------------------------------------------------------

def test_stats_after_seeding_counts_five_embedded_articles_and_no_vector_index(client, seeded):
    response = client.get("/api/stats")
    assert response.status_code == 200
    stats = response.get_json()
    assert (stats["articles"], stats["embedded"], stats["pending"], stats["stale"]) == (5, 5, 0, 0)
    assert stats["model"] == LOCAL_MODEL
    assert stats["index"] is None


def test_healthz_reports_ok_with_a_database_round_trip(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.get_json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"


# --- embedding provider failure ------------------------------------------------------------------

@pytest.fixture
def failing_provider_client(runtime, fake_openai, tmp_path) -> Iterator[FlaskClient]:
    """An app whose embedder is an OpenAI-compatible provider answering 500, sharing the test transaction."""
    settings = Settings(
        data_dir=tmp_path, embedding_provider="openai", embedding_base_url=fake_openai.base_url,
        embedding_api_key="test", embedding_max_retries=0, embedding_timeout=2, auto_seed=False,
    )
    embedder = OpenAIEmbedder(settings)
    provider_runtime = Runtime(settings, runtime.engine, embedder)
    provider_runtime.sessions = runtime.sessions
    fake_openai.fail_next(500, times=10)
    app = create_app({"TESTING": True}, runtime=provider_runtime)
    test_client = app.test_client()
    test_client.environ_base.update(bearer_environ(runtime))
    yield test_client
    embedder.client.close()


def test_provider_failure_stores_article_as_pending_and_keeps_it_out_of_search(
        failing_provider_client, client, fake_openai):
    response = failing_provider_client.post("/api/articles", json=TRADE_IN)
    assert response.status_code == 201
    article = response.get_json()["article"]
    assert article["embedding_status"] == "pending"
    assert article["embedding_model"] is None
    assert isinstance(article["embedding_error"], str) and article["embedding_error"]
    assert response.headers["Location"].endswith(f"/api/articles/{article['id']}")
    assert fake_openai.embedding_requests()[0]["authorization"] == "Bearer test"

    shown = failing_provider_client.get(f"/api/articles/{article['id']}")
    assert shown.status_code == 200
    assert shown.get_json()["article"]["title"] == TRADE_IN["title"]
    assert shown.get_json()["article"]["embedding_status"] == "pending"
    stats = client.get("/api/stats").get_json()
    assert (stats["articles"], stats["pending"], stats["embedded"]) == (1, 1, 0)

    # Searching with a working (local) embedder does not return the vectorless article.
    assert search(client, TRADE_IN_QUESTION) == []
    # Nor does the provider's own search once it recovers.
    with fake_openai.state.lock:
        fake_openai.state.faults.clear()
    assert search(failing_provider_client, TRADE_IN_QUESTION) == []


def test_search_while_provider_fails_falls_back_to_keywords_and_says_so(
        failing_provider_client, client, fake_openai):
    with fake_openai.state.lock:
        fake_openai.state.faults.clear()
    created = failing_provider_client.post("/api/articles", json=TRADE_IN).get_json()["article"]
    assert created["embedding_status"] == "embedded"
    fake_openai.fail_next(500, times=10)
    before = stored_snapshot(client)
    requests_before = len(fake_openai.embedding_requests())

    response = failing_provider_client.post("/api/search", json={"query": "laptop trade-in store credit",
                                                                 "explain": True})

    assert response.status_code == 200
    body = response.get_json()
    assert body["degraded"] == "embedding unavailable"
    assert body["mode"] == "lexical"
    assert [r["id"] for r in body["results"]] == [created["id"]]
    assert body["results"][0]["similarity"] is None
    assert {"laptop", "credit"} <= set(body["results"][0]["explain"]["matched_terms"])
    assert len(fake_openai.embedding_requests()) == requests_before + 1  # max_retries=0: one attempt
    assert stored_snapshot(client) == before


def test_a_database_that_dies_after_the_answer_is_made_does_not_turn_it_into_a_500(app, client):
    """Closing the request's session can fail when the server shut down meanwhile; the answer stands."""

    class DyingSession:
        invalidated = False

        def close(self):
            raise sa.exc.OperationalError("ROLLBACK", {}, Exception("terminating connection"))

        def invalidate(self):
            DyingSession.invalidated = True

    @app.get("/_test/dying")
    def dying():
        g.db = DyingSession()
        return {"ok": True}

    response = client.get("/_test/dying")
    assert response.status_code == 200 and response.get_json() == {"ok": True}
    assert DyingSession.invalidated
