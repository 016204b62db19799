"""The OpenAPI 3.1 description of the JSON API, served at /api/openapi.json, and a readable page at /api/docs.

Each operation names the Flask endpoint that serves it, so a test can hold the description and the
registered routes to each other, and the security of each operation comes from the access policy itself.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, render_template, request

from service.config import Settings
from service.db.models import CANDIDATE_STATUSES, PROPOSAL_STATUSES
from service.validation import QUERY_MAX
from service.web.access import PUBLIC_ENDPOINTS, is_public
from service.web.errors import ApiError
from service.web.openapi_desk import DESK_SCHEMAS, desk_list_parameters, desk_operations
from service.web.openapi_gate import GATE_SCHEMAS, gate_operations
from service.web.openapi_privacy import PRIVACY_SCHEMAS, privacy_operations
from service.web.openapi_schemas import SCHEMAS, ref
from service.web.openapi_widget import WIDGET_SCHEMAS, widget_operations

openapi = Blueprint("openapi", __name__, url_prefix="/api")
DOCS_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"
ERROR_STATUSES = {
    "400": "invalid input: bad JSON, wrong types, out-of-range values or unknown fields (named in the message)",
    "401": "needs an admin: send `Authorization: Bearer <token>`",
    "403": "the caller's role may not do this (an agent managing articles), a token calling a session-only "
           "operation (the composer), or a CSRF failure",
    "404": "no such resource",
    "409": "the candidate or proposal was already decided, or its article changed since; a rating before the solve; "
           "an article edited since the `version` sent (`version_conflict`, with the current article)",
    "413": "request body larger than SUPPORTRAG_MAX_REQUEST_BYTES",
    "415": "the body is not `Content-Type: application/json`",
    "429": "rate limited; see `Retry-After`",
    "503": "the database or embedding provider is unavailable; see `Retry-After`",
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """An optional query-string parameter."""
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _path_id(name: str) -> dict[str, Any]:
    """A positive integer id in the path."""
    return {"name": name, "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}


# What check_query_string lets through: no NUL or other control characters except tab.
QUERY_TEXT_PATTERN = "^[^\\u0000-\\u0008\\u000a-\\u001f\\u007f]*$"
PAGE = _query("page", {"type": "integer", "minimum": 1, "maximum": 1_000_000}, "page number, from 1")
PER_PAGE = _query("per_page", {"type": "integer", "minimum": 1, "maximum": 100}, "items per page")
SIGNATURE_HEADER = {"name": "X-Signature", "in": "header", "required": True,
                    "schema": {"type": "string", "pattern": "^t=[0-9]{1,12},v1=[0-9a-fA-F]{64}$"},
                    "description": "`t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.\" + raw body, key "
                                   "INBOUND_EMAIL_SECRET>`; refused more than 300 s from the server's clock"}
SECRET_HEADER = {"name": "X-Ticket-Secret", "in": "header", "required": False, "schema": {"type": "string"},
                 "description": "the `secret` returned when the ticket was submitted (not needed by admins)"}

IDEMPOTENCY_HEADER = {"name": "Idempotency-Key", "in": "header", "required": False,
                      "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                      "description": "a repeat with the same key returns the first result (Idempotent-Replayed: "
                                     "true) and sends nothing; the key with another body is a 409"}
# (path, method, endpoint, summary, request body schema or None, (status, response schema or None), parameters)
OPERATIONS: list[tuple[str, str, str, str, str | None, tuple[str, str | None], list[dict[str, Any]]]] = [
    ("/healthz", "get", "health.healthz", "Liveness plus a database round trip", None, ("200", "Health"), []),
    ("/api/articles", "get", "api.articles_index", "A page of articles, newest first", None,
     ("200", "ArticlePage"), [PAGE, PER_PAGE, _query("category", {"type": "string", "pattern": QUERY_TEXT_PATTERN},
                                            "only this category")]),
    ("/api/articles", "post", "api.articles_create", "Create an article (embedded now, or stored as pending)",
     "ArticleCreate", ("201", "ArticleEnvelope"), []),
    ("/api/articles/{article_id}", "get", "api.articles_show", "One article", None, ("200", "ArticleEnvelope"),
     [_path_id("article_id")]),
    ("/api/articles/{article_id}", "patch", "api.articles_update", "Change fields; changed text is re-embedded",
     "ArticleUpdate", ("200", "ArticleEnvelope"), [_path_id("article_id")]),
    ("/api/articles/{article_id}", "delete", "api.articles_delete", "Delete an article", None, ("204", None),
     [_path_id("article_id")]),
    ("/api/search", "post", "api.search", "Ranked articles for a query, with the score breakdown",
     "SearchRequest", ("200", "SearchResponse"), []),
    ("/api/stats", "get", "api.stats", "Article counts, active model and vector index", None, ("200", "Stats"), []),
    ("/api/tickets", "post", "tickets_api.tickets_create", "Submit a ticket; answered at once; returns its secret",
     "TicketCreate", ("201", "TicketCreated"), []),
    ("/api/tickets", "get", "tickets_api.tickets_index",
     "The one ticket list: a queue (default all, newest first; work queues by due time), searched and filtered",
     None, ("200", "DeskTicketPage"), [PAGE, PER_PAGE, *desk_list_parameters(_query)]),
    ("/api/tickets/{ticket_id}/messages", "get", "tickets_api.tickets_messages",
     "The thread (internal notes included) with each reply's e-mail state", None, ("200", "MessageList"),
     [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/draft", "get", "tickets_api.tickets_draft",
     "The ticket's current AI draft, signed by the caller (404 when there is none: reading never makes one); "
     "`grounded` is false (and `notice` says why) when no article clears the answer gate and no solved ticket is close",
     None, ("200", "Draft"), [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/draft", "post", "tickets_api.tickets_draft_create",
     "Make (or remake) the AI draft for an agent, with its citations; the body may be empty, `instruction` needs "
     "a language model", "DraftRequest", ("201", "Draft"), [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/composer", "get", "agent_work_api.composer_show",
     "The logged-in agent's unsent reply text for the ticket (sessions only; empty when none)", None,
     ("200", "ComposerEnvelope"), [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/composer", "put", "agent_work_api.composer_save",
     "Save the reply being typed (sessions only; an empty body forgets it; sending the reply clears it)",
     "ComposerSave", ("200", "ComposerEnvelope"), [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/similar", "get", "agent_work_api.similar_show",
     "Solved tickets like this one, best first, with the agent's reply that solved them (scrubbed)", None,
     ("200", "SimilarTickets"), [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/replies", "post", "tickets_api.tickets_replies",
     "An agent's reply (e-mailed through the outbox: `email` is `queued`) or internal note; sets the state",
     "ReplyCreate", ("201", "ReplyCreated"), [_path_id("ticket_id"), IDEMPOTENCY_HEADER]),
    ("/api/mail/outbox/{outbox_id}/retry", "post", "mail_api.retry",
     "Send a failed e-mail again from its first attempt (409 unless it is failed); see a message's `email_outbox_id`",
     None, ("200", "MailEnvelope"), [_path_id("outbox_id")]),
    ("/api/tickets/{ticket_id}/assign", "post", "tickets_api.tickets_assign",
     "Assign to `assignee` (a username; null unassigns); a logged-in agent may send no body: to me", "Assign",
     ("200", "WorkTicketEnvelope"), [_path_id("ticket_id")]),
    ("/api/inbound/email", "post", "inbound.email",
     "Raw MIME from a mail provider, signed with a timestamp (`X-Signature: t=…,v1=…`); stored, then a follow-up, "
     "a new ticket, a duplicate (a replay), ignored or quarantined; 503 while the database is down; 413 only above "
     "INBOUND_RAW_MAX_BYTES (not SUPPORTRAG_MAX_REQUEST_BYTES: the attachment caps apply after storing)",
     "RawEmail", ("200", "InboundOutcome"), [SIGNATURE_HEADER]),
    ("/api/tickets/{ticket_id}/attachments/{attachment_id}", "get", "attachments.agent_download",
     "Download an attachment of the ticket's thread (always as a file: `Content-Disposition: attachment`)", None,
     ("200", None), [_path_id("ticket_id"), _path_id("attachment_id")]),
    ("/api/tickets/{ticket_id}", "get", "tickets_api.tickets_show", "One ticket with answer and citations", None,
     ("200", "TicketEnvelope"), [_path_id("ticket_id")]),
    ("/api/tickets/{ticket_id}/feedback", "post", "tickets_api.tickets_feedback",
     "Whether the answer helped (the submitter, with X-Ticket-Secret, or an admin)", "FeedbackCreate",
     ("201", "FeedbackEnvelope"), [_path_id("ticket_id"), SECRET_HEADER]),
    ("/api/reports/gaps", "get", "tickets_api.reports_gaps", "Handed-off or unhelpful tickets by nearest article",
     None, ("200", "Gaps"), [_query("days", {"type": "integer", "minimum": 1, "maximum": 3650}, "look back"),
                             _query("limit", {"type": "integer", "minimum": 1, "maximum": 200}, "most groups")]),
    ("/api/admin/preview", "post", "admin_api.preview", "The ranking search gives, plus one article's breakdown",
     "PreviewRequest", ("200", "Preview"), []),
    ("/api/article-candidates", "get", "learning_api.candidates_index", "Article candidates, newest first", None,
     ("200", "CandidateList"), [_query("status", {"enum": ["all", *CANDIDATE_STATUSES]}, "default: pending")]),
    ("/api/article-candidates/{candidate_id}", "get", "learning_api.candidates_show", "One article candidate",
     None, ("200", "CandidateEnvelope"), [_path_id("candidate_id")]),
    ("/api/article-candidates/{candidate_id}/approve", "post", "learning_api.candidates_approve",
     "Publish a pending candidate (with edits) as a new article, searchable at once", "CandidateApprove",
     ("200", "CandidatePublished"), [_path_id("candidate_id")]),
    ("/api/article-candidates/{candidate_id}/merge", "post", "learning_api.candidates_merge",
     "Add a pending candidate's text to its nearest existing section", "CandidateMerge",
     ("200", "CandidatePublished"), [_path_id("candidate_id")]),
    ("/api/article-candidates/{candidate_id}/reject", "post", "learning_api.candidates_reject",
     "Reject a pending candidate", None, ("200", "CandidateEnvelope"), [_path_id("candidate_id")]),
    ("/api/importance-proposals", "get", "learning_api.proposals_index", "Importance proposals with evidence",
     None, ("200", "ProposalList"), [_query("status", {"enum": ["all", *PROPOSAL_STATUSES]}, "default: pending")]),
    ("/api/importance-proposals/refresh", "post", "learning_api.proposals_refresh",
     "Recount outcomes over the window and store the rule's proposals", None, ("200", "ProposalList"), []),
    ("/api/importance-proposals/{proposal_id}/preview", "get", "learning_api.proposals_preview",
     "What-if ranking at the proposed importance for the questions behind it", None, ("200", "ProposalPreview"),
     [_path_id("proposal_id"), _query("question", {"type": "string", "maxLength": QUERY_MAX,
                                                   "pattern": QUERY_TEXT_PATTERN}, "a question of your own too")]),
    ("/api/importance-proposals/{proposal_id}/apply", "post", "learning_api.proposals_apply",
     "Apply a pending proposal through the importance update (audited)", None, ("200", "ProposalApplied"),
     [_path_id("proposal_id")]),
    ("/api/importance-proposals/{proposal_id}/dismiss", "post", "learning_api.proposals_dismiss",
     "Dismiss a pending proposal", None, ("200", "ProposalEnvelope"), [_path_id("proposal_id")]),
    ("/api/articles/{article_id}/importance-changes", "get", "learning_api.importance_changes",
     "The article's importance audit log: who, when, from → to, why", None, ("200", "ImportanceChanges"),
     [_path_id("article_id")]),
    *desk_operations(_query, _path_id, SECRET_HEADER),
    *gate_operations(_query, _path_id),
    *privacy_operations(_query, _path_id),
    *widget_operations(_query),
    ("/api/openapi.json", "get", "openapi.spec", "This description", None, ("200", None), []),
    ("/api/docs", "get", "openapi.docs", "This description as a page", None, ("200", None), []),
]


OPTIONAL_BODIES = frozenset({"DraftRequest"})  # an empty POST makes a plain draft

QUERY_PARAMETERS = {endpoint: frozenset(p["name"] for p in parameters if p["in"] == "query")
                    for _, _, endpoint, _, _, _, parameters in OPERATIONS}


def refuse_unknown_query_parameters() -> None:
    """Before every request: a described operation refuses query parameters it does not take, by name."""
    allowed = QUERY_PARAMETERS.get(request.endpoint or "")
    if allowed is None:
        return  # the admin pages and static files are not described here
    unknown = sorted(name for name in request.args if name not in allowed)
    if unknown:
        shown = ", ".join(repr(name) for name in unknown)
        raise ApiError(400, "validation_error",
                       f"unknown query parameter(s) {shown}; allowed: {', '.join(sorted(allowed)) or 'none'}",
                       {name: "unknown query parameter" for name in unknown})


def _security(endpoint: str, settings: Settings) -> list[dict[str, list]]:
    """Anonymous callers allowed (``{}``) or an admin bearer token needed, per the access policy."""
    if endpoint in PUBLIC_ENDPOINTS:
        return [{}]
    return [{}, {"bearerAuth": []}] if is_public(endpoint, settings) else [{"bearerAuth": []}]


def _responses(status: str, schema: str | None, endpoint: str) -> dict[str, Any]:
    """The success answer, the usual errors, and ``default``: every other status in the same error shape."""
    ok: dict[str, Any] = {"description": "success"}
    if endpoint == "openapi.docs":
        ok["content"] = {"text/html": {"schema": {"type": "string"}}}
    elif schema:
        ok["content"] = {"application/json": {"schema": ref(schema)}}
    error = {"content": {"application/json": {"schema": ref("Error")}}}
    responses = {status: ok, **{code: {"description": text, **error} for code, text in ERROR_STATUSES.items()}}
    responses["default"] = {"description": "any other error, in the same shape", **error}
    return responses


def build_spec(settings: Settings) -> dict[str, Any]:
    """The whole description for an app running with ``settings``."""
    paths: dict[str, dict[str, Any]] = {}
    for path, method, endpoint, summary, body, (status, schema), parameters in OPERATIONS:
        operation: dict[str, Any] = {
            "operationId": endpoint, "summary": summary, "parameters": parameters,
            "security": _security(endpoint, settings), "responses": _responses(status, schema, endpoint),
        }
        if body == "RawEmail":
            operation["requestBody"] = {"required": True, "content": {
                "message/rfc822": {"schema": {"type": "string", "format": "binary"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}
        elif body:
            operation["requestBody"] = {"required": body not in OPTIONAL_BODIES,
                                        "content": {"application/json": {"schema": ref(body)}}}
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "supportrag", "version": "1", "description": (
            "Support-ticket answering on PostgreSQL + pgvector. Every error has one shape (`Error`); "
            "unknown fields are refused by name.")},
        "paths": paths,
        "components": {"schemas": SCHEMAS | DESK_SCHEMAS | GATE_SCHEMAS | PRIVACY_SCHEMAS | WIDGET_SCHEMAS,
                       "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer",
                                                          "description": "`supportrag token create`"}}},
    }


@openapi.get("/openapi.json")
def spec():
    """The OpenAPI 3.1 description."""
    return jsonify(build_spec(current_app.extensions["supportrag"].settings))


@openapi.get("/docs")
def docs():
    """Every operation with its parameters, body and answers, readable without any script."""
    page = render_template("openapi/docs.html", spec=build_spec(current_app.extensions["supportrag"].settings))
    response = Response(page, mimetype="text/html")
    response.headers["Content-Security-Policy"] = DOCS_CSP
    return response
