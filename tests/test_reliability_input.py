"""Bad input anywhere is a 4xx in the one error shape (an HTML page under /admin), and nothing stored changes.

The first cases are regressions: each used to end in a 500 with a traceback.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest
from flask.testing import FlaskClient

from .admin_helpers import csrf_from
from .helpers import assert_error

TICKET = {"subject": "Refund", "body": "I want a refund for my order"}


def raw(client: FlaskClient, method: str, path: str, text: str | bytes, **kwargs: Any):
    """Send ``text`` verbatim as a JSON body (so it can hold what json.dumps would never write)."""
    return client.open(path, method=method.upper(), data=text, content_type="application/json", **kwargs)


def snapshot(client: FlaskClient) -> dict[str, Any]:
    """What is stored: every article and ticket as the API shows them."""
    return {"articles": client.get("/api/articles?per_page=100").get_json()["articles"],
            "tickets": client.get("/api/tickets?per_page=100").get_json()["tickets"]}


@pytest.fixture
def ticket(client) -> dict[str, Any]:
    """A stored ticket (with its secret) that feedback cases target."""
    response = client.post("/api/tickets", json=TICKET)
    assert response.status_code == 201
    return response.get_json()


SURROGATE_CASES = [
    # (id, method, path, JSON text with a lone surrogate escape, field named in details)
    ("search-query", "post", "/api/search", '{"query": "refund \\ud800"}', "query"),
    ("article-title", "post", "/api/articles", '{"title": "T \\ud800", "content": "c"}', "title"),
    ("article-category", "post", "/api/articles", '{"title": "T", "content": "c", "category": "\\udfff"}',
     "category"),
    ("patch-content", "patch", "/api/articles/{article}", '{"content": "x \\ud83d"}', "content"),
    ("ticket-body", "post", "/api/tickets", '{"subject": "s", "body": "b \\ud800"}', "body"),
    ("ticket-email", "post", "/api/tickets", '{"subject": "s", "body": "b", "email": "a\\ud800@example.com"}',
     "email"),
    ("feedback-comment", "post", "/api/tickets/{ticket}/feedback", '{"helpful": true, "comment": "\\ud800"}',
     "comment"),
    ("preview-query", "post", "/api/admin/preview", '{"query": "\\udc00"}', "query"),
]


@pytest.mark.parametrize("method, path, text, field", [c[1:] for c in SURROGATE_CASES],
                         ids=[c[0] for c in SURROGATE_CASES])
def test_lone_surrogates_are_400_naming_the_field_not_a_500_or_an_embedder_outage(
        seeded, client, ticket, caplog, method, path, text, field):
    article_id = client.get("/api/articles").get_json()["articles"][0]["id"]
    path = path.format(article=article_id, ticket=ticket["ticket"]["id"])
    before = snapshot(client)
    with caplog.at_level(logging.WARNING):
        error = assert_error(raw(client, method, path, text), 400, "validation_error")
    assert "surrogate" in error["details"][field]
    assert not [r for r in caplog.records if "embedding failed" in r.getMessage()]
    assert snapshot(client) == before


def test_deeply_nested_json_is_400_not_a_recursion_error(seeded, client):
    error = assert_error(raw(client, "post", "/api/search", "[" * 100_000), 400, "invalid_json")
    assert "nested too deeply" in error["message"]


def test_moderately_nested_json_beyond_the_depth_limit_is_400(seeded, client):
    text = '{"query": "refund", "explain": ' + "[" * 40 + "]" * 40 + "}"
    assert_error(raw(client, "post", "/api/search", text), 400, "validation_error")


@pytest.mark.parametrize("path", ["/api/articles?category=%00", "/api/articles?category=a%01b",
                                  "/api/tickets?status=%00", "/api/articles?%00=1", "/api/reports/gaps?days=%00"])
def test_nul_or_control_characters_in_a_query_string_are_400_not_a_database_error(seeded, client, path):
    error = assert_error(client.get(path), 400, "validation_error")
    assert "control character" in error["message"]


@pytest.mark.parametrize("path", ["/admin/articles?q=%00", "/admin/articles?category=%00",
                                  "/admin/tickets?status=x%00"])
def test_nul_in_an_admin_filter_is_a_400_html_page(seeded, admin_client, path):
    response = admin_client.get(path)
    assert response.status_code == 400
    assert response.mimetype == "text/html"
    assert "control character" in response.get_data(as_text=True)


BAD_BODIES = [
    # (id, method, path, body bytes, status, code, field named in details or None)
    ("search-unknown-field", "post", "/api/search", b'{"query": "refund", "mode": "bogus"}', 400,
     "validation_error", "mode"),
    ("preview-unknown-field", "post", "/api/admin/preview", b'{"query": "refund", "weights": {}}', 400,
     "validation_error", "weights"),
    ("ticket-unknown-field", "post", "/api/tickets", b'{"subject": "s", "body": "b", "priority": 1}', 400,
     "validation_error", "priority"),
    ("surrogate-field-name", "post", "/api/search", b'{"query": "ok", "\\ud800": 1}', 400, "validation_error",
     "\\ud800"),
    ("non-utf8", "post", "/api/search", b'{"query": "caf\xe9"}', 400, "invalid_encoding", "body"),
    ("utf16", "post", "/api/search", '{"query": "refund"}'.encode("utf-16"), 400, "invalid_encoding", "body"),
    ("nan-limit", "post", "/api/search", b'{"query": "refund", "limit": NaN}', 400, "validation_error", "limit"),
    ("infinity-importance", "post", "/api/articles", b'{"title": "t", "content": "c", "importance": -Infinity}',
     400, "validation_error", "importance"),
    ("1e400-importance", "post", "/api/articles", b'{"title": "t", "content": "c", "importance": 1e400}',
     400, "validation_error", "importance"),
    ("huge-limit", "post", "/api/search", b'{"query": "refund", "limit": 100000000000000000000000000}', 400,
     "validation_error", "limit"),
    ("negative-limit", "post", "/api/search", b'{"query": "refund", "limit": -1}', 400, "validation_error", "limit"),
    ("5000-digit-integer", "post", "/api/search", b'{"query": "r", "limit": ' + b"9" * 5000 + b"}", 400,
     "invalid_json", None),
    ("query-array", "post", "/api/search", b'{"query": ["refund"]}', 400, "validation_error", "query"),
    ("explain-string", "post", "/api/search", b'{"query": "refund", "explain": "yes"}', 400, "validation_error",
     "explain"),
    ("nul-in-title", "post", "/api/articles", b'{"title": "a\\u0000b", "content": "c"}', 400, "validation_error",
     "title"),
    ("empty-body", "post", "/api/search", b"", 400, "invalid_json", None),
    ("json-string", "post", "/api/tickets", b'"hello"', 400, "invalid_json", None),
    ("sql-in-id", "get", "/api/articles/1;DROP TABLE knowledge_base", b"", 404, "not_found", None),
    ("huge-per-page", "get", "/api/articles?per_page=99999999999999999999", b"", 400, "validation_error",
     "per_page"),
    ("negative-page", "get", "/api/tickets?page=-1", b"", 400, "validation_error", "page"),
    ("unknown-query-parameter", "get", "/api/articles?sort=title", b"", 400, "validation_error", "sort"),
    ("search-limit-as-float", "post", "/api/search", b'{"query": "refund", "limit": 2.5}', 400,
     "validation_error", "limit"),
]


@pytest.mark.parametrize("method, path, body, status, code, field", [c[1:] for c in BAD_BODIES],
                         ids=[c[0] for c in BAD_BODIES])
def test_bad_input_is_a_4xx_in_the_error_shape_and_stores_nothing(seeded, client, method, path, body, status,
                                                                   code, field):
    before = snapshot(client)
    kwargs = {"data": body, "content_type": "application/json"} if method != "get" else {}
    error = assert_error(client.open(path, method=method.upper(), **kwargs), status, code)
    if field:
        assert field in error["details"]
    if error["details"].get(field) in ("unknown field", "unknown query parameter"):
        assert repr(field) in error["message"]  # the message names the field, not just "invalid"
    assert snapshot(client) == before


def test_an_oversized_body_is_413_and_a_wrong_content_type_415(seeded, client, runtime):
    oversized = b'{"query": "' + b"a" * runtime.settings.max_request_bytes + b'"}'
    assert_error(raw(client, "post", "/api/search", oversized), 413, "request_entity_too_large")
    assert_error(client.post("/api/tickets", data="subject=s&body=b",
                             content_type="application/x-www-form-urlencoded"), 415, "unsupported_media_type")


def test_markup_and_sql_are_stored_verbatim_and_shown_escaped(seeded, client, admin_client):
    title = "<script>alert('x')</script> Robert'); DROP TABLE tickets;--"
    created = client.post("/api/articles", json={"title": title, "content": "<img src=x onerror=alert(1)>"})
    assert created.status_code == 201
    article = created.get_json()["article"]
    assert article["title"] == title  # stored as sent: escaping is the page's job, not the database's
    page = admin_client.get(f"/admin/articles/{article['id']}").get_data(as_text=True)
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "<img src=x" not in page
    assert client.get("/api/tickets").status_code == 200  # the tickets table is still there


def test_a_whole_number_sent_as_a_float_is_accepted_as_json_schema_says(seeded, client):
    response = raw(client, "post", "/api/search", '{"query": "refund", "limit": 2.0}')
    assert response.status_code == 200 and len(response.get_json()["results"]) == 2


ADMIN_FORMS = [
    # (id, method, path, form fields (the CSRF token is added), expected status)
    ("nul-title-nan-importance", "post", "/admin/articles/new",
     {"title": "a\x00b", "content": "c", "importance": "nan"}, 400),
    ("nul-category-huge-importance", "post", "/admin/articles/new",
     {"title": "ok", "content": "c\x01", "category": "x\x00", "importance": "1e999"}, 400),
    ("nul-in-login", "post", "/admin/login", {"username": "a\x00", "password": "p\x00"}, 401),
    ("non-utf8-and-huge-page", "get", "/admin/articles?q=%ED%A0%80&page=99999999999999999999", {}, 200),
    ("huge-article-filter", "get", "/admin/tickets?article_id=99999999999999999999999&page=-5", {}, 200),
]


@pytest.mark.parametrize("method, path, form, status", [c[1:] for c in ADMIN_FORMS], ids=[c[0] for c in ADMIN_FORMS])
def test_bad_admin_form_input_gets_an_html_page_with_a_4xx_or_is_ignored(seeded, admin_client, client, method, path,
                                                                          form, status):
    before = snapshot(client)
    token = csrf_from(admin_client.get("/admin/articles/new").get_data(as_text=True))
    kwargs = {"data": {"csrf_token": token, **form}} if method == "post" else {}
    response = getattr(admin_client, method)(path, **kwargs)
    assert (response.status_code, response.mimetype) == (status, "text/html")
    assert snapshot(client) == before


def test_a_bad_file_or_category_in_an_import_is_reported_not_a_500(seeded, admin_client, client):
    token = csrf_from(admin_client.get("/admin/import").get_data(as_text=True))
    response = admin_client.post("/admin/import", content_type="multipart/form-data", data={
        "csrf_token": token, "category": "bad\x00",
        "files": [(io.BytesIO(b"# Fine\n\nbody"), "a.md"), (io.BytesIO(b"\xff\xfe# T\x00\n\nbody"), "b.md")]})
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert "added 0, updated 0, unchanged 0, pruned 0, failed 2" in response.get_data(as_text=True)
