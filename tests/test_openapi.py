"""The OpenAPI description stays true: every registered JSON route is described and nothing else is,
request bodies list exactly the fields the endpoints accept, and responses use the one error shape."""

from __future__ import annotations

import re

import pytest
import schemathesis

from service.web.api import ARTICLE_FIELDS, SEARCH_FIELDS
from service.web.learning import EDIT_FIELDS
from service.web.tickets import FEEDBACK_FIELDS, TICKET_FIELDS

from .helpers import assert_error

UNDESCRIBED = {"static"}  # the admin pages' CSS and JavaScript


def registered_operations(app) -> dict[tuple[str, str], str]:
    """(OpenAPI path, method) → endpoint for every JSON route (not the HTML admin and help pages)."""
    operations = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint in UNDESCRIBED or rule.rule.startswith(("/admin", "/help")) or rule.rule == "/":
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            operations[(path, method.lower())] = rule.endpoint
    return operations


def described_operations(spec) -> dict[tuple[str, str], str]:
    """(path, method) → operationId, which names the Flask endpoint."""
    return {(path, method): op["operationId"] for path, ops in spec["paths"].items() for method, op in ops.items()}


def test_the_description_lists_exactly_the_registered_routes_and_endpoints(app, anonymous_client):
    spec = anonymous_client.get("/api/openapi.json").get_json()
    assert spec["openapi"] == "3.1.0"
    assert described_operations(spec) == registered_operations(app)


def test_the_description_is_a_valid_openapi_document(anonymous_client):
    schema = schemathesis.openapi.from_dict(anonymous_client.get("/api/openapi.json").get_json())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(described_operations(schema.raw_schema))


@pytest.mark.parametrize("schema_name, accepted", [
    ("ArticleCreate", ARTICLE_FIELDS), ("ArticleUpdate", (*ARTICLE_FIELDS, "version")), ("SearchRequest", SEARCH_FIELDS),
    ("TicketCreate", TICKET_FIELDS), ("FeedbackCreate", FEEDBACK_FIELDS),
    ("PreviewRequest", ("query", "limit", "article_id")),
    ("CandidateApprove", EDIT_FIELDS), ("CandidateMerge", ("content",)),
])
def test_request_bodies_list_exactly_the_accepted_fields_and_refuse_others(anonymous_client, schema_name, accepted):
    schema = anonymous_client.get("/api/openapi.json").get_json()["components"]["schemas"][schema_name]
    assert set(schema["properties"]) == set(accepted)
    assert schema["additionalProperties"] is False


def test_every_operation_documents_the_error_shape_and_who_may_call_it(anonymous_client):
    spec = anonymous_client.get("/api/openapi.json").get_json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op["responses"]["default"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"}, (method, path)
            assert op["security"], (method, path)
    assert spec["paths"]["/api/tickets"]["get"]["security"] == [{"bearerAuth": []}]
    assert {} in spec["paths"]["/api/tickets"]["post"]["security"]  # public by default


def test_the_error_shape_schema_is_the_one_errors_use(anonymous_client):
    error_schema = anonymous_client.get("/api/openapi.json").get_json()["components"]["schemas"]["Error"]
    assert error_schema["required"] == ["error"]
    assert error_schema["properties"]["error"]["required"] == ["code", "message", "details"]
    assert_error(anonymous_client.get("/api/nope"), 404, "not_found")


def test_the_docs_page_lists_every_operation_without_scripts(anonymous_client):
    response = anonymous_client.get("/api/docs")
    assert response.status_code == 200 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert "<script" not in page and "script-src" not in response.headers["Content-Security-Policy"]
    for path in ("/api/search", "/api/tickets/{ticket_id}/feedback", "/healthz"):
        assert f"<code>{path}</code>" in page
