"""JSON Schemas (OpenAPI 3.1 components) for the request and response bodies of the JSON API.

Request schemas are as strict as the validators (lengths, ranges, no unknown fields), so a fuzzer that
follows them sends only what the service accepts; response schemas say what clients may rely on.
"""

from __future__ import annotations

from typing import Any

from service.config import Settings
from service.db.models import (
    CANDIDATE_ACTIONS,
    CANDIDATE_SOURCES,
    CANDIDATE_STATUSES,
    CATEGORY_MAX,
    CHANNELS,
    CONTENT_MAX,
    IMPORTANCE_CHANGE_REASONS,
    IMPORTANCE_MAX,
    IMPORTANCE_MIN,
    MESSAGE_KINDS,
    PROPOSAL_STATUSES,
    TICKET_STATUSES,
    TITLE_MAX,
    WORK_STATES,
)
from service.tickets.reply_files import FILENAME_MAX
from service.tickets.validation import BODY_MAX, COMMENT_MAX, EMAIL_MAX, EMAIL_PATTERN, SUBJECT_MAX
from service.validation import QUERY_MAX, SEARCH_LIMIT_MAX

# Some non-blank character and no NUL: what the validators call "text" (a bare \S would also match one NUL).
TEXT_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
NO_NUL_PATTERN = "^[^\\u0000]*$"
# Standard base64 of at least one byte, padded: what base64.b64decode(validate=True) takes.
BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$"


def ref(name: str) -> dict[str, str]:
    """A reference to a component schema."""
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null (OpenAPI 3.1 spells it as a type list)."""
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict[str, Any], required: list[str] | None = None, *, closed: bool = False) -> dict[str, Any]:
    """An object schema; ``closed`` forbids other properties (request bodies)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


def text(max_length: int) -> dict[str, Any]:
    """A non-blank string without NUL of at most ``max_length`` characters (after trimming)."""
    return {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": TEXT_PATTERN}


STRING, INTEGER, NUMBER, BOOLEAN = ({"type": t} for t in ("string", "integer", "number", "boolean"))
TIMESTAMP = {"type": "string", "format": "date-time"}
WEIGHTS = obj({"similarity_weight": NUMBER, "recency_weight": NUMBER, "recency_window_days": NUMBER},
              ["similarity_weight", "recency_weight", "recency_window_days"])
ARTICLE_FIELDS = {
    "title": text(TITLE_MAX), "content": text(CONTENT_MAX),
    "category": nullable({"type": "string", "maxLength": CATEGORY_MAX, "pattern": NO_NUL_PATTERN}),
    "importance": {"type": "number", "minimum": IMPORTANCE_MIN, "maximum": IMPORTANCE_MAX},
}
PAGE_FIELDS = {"page": INTEGER, "per_page": INTEGER, "total": INTEGER, "pages": INTEGER}

IMPORTANCE = {"type": "number", "minimum": IMPORTANCE_MIN, "maximum": IMPORTANCE_MAX}
DECIDED = {"created_at": TIMESTAMP, "decided_at": nullable(TIMESTAMP), "decided_by": nullable(STRING)}
CANDIDATE = obj({
    "id": INTEGER, "ticket_id": nullable(INTEGER), "status": {"enum": list(CANDIDATE_STATUSES)}, "title": STRING,
    "body": STRING, "source": {"enum": list(CANDIDATE_SOURCES)}, "action": {"enum": list(CANDIDATE_ACTIONS)},
    "target": nullable(obj({"article_id": INTEGER, "article_title": nullable(STRING),
                            "heading_path": {"type": "array", "items": STRING}, "label": STRING,
                            "similarity": nullable(NUMBER)}, ["article_id", "heading_path", "similarity"])),
    "also_asked": {"type": "array", "items": obj({"ticket_id": INTEGER, "question": STRING, "similarity": NUMBER},
                                                 ["ticket_id", "question", "similarity"])},
    "note": nullable(STRING), "article_id": nullable(INTEGER), **DECIDED,
}, ["id", "ticket_id", "status", "title", "body", "source", "action", "target", "also_asked", "article_id"])
PROPOSAL = obj({
    "id": INTEGER, "article_id": INTEGER, "article_title": STRING, "status": {"enum": list(PROPOSAL_STATUSES)},
    "current_importance": IMPORTANCE, "proposed_importance": IMPORTANCE,
    "evidence": obj({"window_days": INTEGER, "solved": INTEGER, "escalated": INTEGER, "not_helpful": INTEGER,
                     "drafts_unchanged": INTEGER, "drafts_replaced": INTEGER, "outcomes": INTEGER,
                     "solve_rate": nullable(NUMBER), "smoothed_rate": nullable(NUMBER), "mean_rate": NUMBER,
                     "reason": STRING, "questions": {"type": "array"}},
                    ["solved", "escalated", "not_helpful", "drafts_unchanged", "drafts_replaced", "outcomes",
                     "mean_rate"]),
    **DECIDED,
}, ["id", "article_id", "status", "current_importance", "proposed_importance", "evidence"])
LEARNING_SCHEMAS: dict[str, Any] = {
    "Candidate": CANDIDATE,
    "CandidateEnvelope": obj({"candidate": ref("Candidate")}, ["candidate"]),
    "CandidateList": obj({"candidates": {"type": "array", "items": ref("Candidate")}}, ["candidates"]),
    "CandidatePublished": obj({"candidate": ref("Candidate"), "article": ref("Article")}, ["candidate", "article"]),
    "CandidateApprove": obj({"title": text(TITLE_MAX), "content": text(CONTENT_MAX), "category": nullable(
        {"type": "string", "maxLength": CATEGORY_MAX, "pattern": NO_NUL_PATTERN})}, closed=True),
    "CandidateMerge": obj({"content": text(CONTENT_MAX)}, closed=True),
    "Proposal": PROPOSAL,
    "ProposalList": obj({"proposals": {"type": "array", "items": ref("Proposal")}}, ["proposals"]),
    "ProposalEnvelope": obj({"proposal": ref("Proposal")}, ["proposal"]),
    "ProposalApplied": obj({"proposal": ref("Proposal"), "article": ref("Article")}, ["proposal", "article"]),
    "ProposalPreview": obj({"proposal_id": INTEGER, "article_id": INTEGER, "proposed_importance": NUMBER,
                            "questions": {"type": "array", "items": obj({
                                "question": STRING, "rank_now": nullable(INTEGER), "rank_then": nullable(INTEGER),
                                "score_now": nullable(NUMBER), "score_then": nullable(NUMBER),
                                "ranking_then": {"type": "array"}, "note": nullable(STRING)},
                                ["question", "rank_now", "rank_then"])}},
                           ["proposal_id", "article_id", "proposed_importance", "questions"]),
    "ImportanceChanges": obj({"article_id": INTEGER, "changes": {"type": "array", "items": obj({
        "id": INTEGER, "article_id": INTEGER, "old_importance": NUMBER, "new_importance": NUMBER,
        "reason": {"enum": list(IMPORTANCE_CHANGE_REASONS)}, "proposal_id": nullable(INTEGER),
        "actor": nullable(STRING), "why": STRING, "created_at": TIMESTAMP},
        ["old_importance", "new_importance", "reason", "actor", "why", "created_at"])}}, ["article_id", "changes"]),
}

SCHEMAS: dict[str, Any] = {
    "Error": obj({"error": obj({"code": STRING, "message": {"type": "string", "minLength": 1},
                                "details": {"type": "object"}}, ["code", "message", "details"], closed=True)},
                 ["error"], closed=True),
    "ArticleCreate": obj(ARTICLE_FIELDS, ["title", "content"], closed=True),
    "ArticleUpdate": obj({**ARTICLE_FIELDS, "version": {"type": "integer", "minimum": 1}}, closed=True),
    "Article": obj({
        "id": INTEGER, "title": STRING, "content": STRING, "category": nullable(STRING), "importance": NUMBER,
        "created_at": TIMESTAMP, "updated_at": TIMESTAMP, "embedding_model": nullable(STRING),
        "embedding_status": {"enum": ["embedded", "pending", "stale"]}, "embedding_error": nullable(STRING),
        "version": INTEGER,
    }, ["id", "title", "content", "category", "importance", "created_at", "updated_at", "embedding_status"]),
    "ArticleEnvelope": obj({"article": ref("Article")}, ["article"]),
    "ArticlePage": obj({"articles": {"type": "array", "items": ref("Article")}, **PAGE_FIELDS},
                       ["articles", *PAGE_FIELDS]),
    "SearchRequest": obj({
        "query": text(QUERY_MAX), "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX},
        "explain": BOOLEAN,
    }, ["query"], closed=True),
    "SearchResult": obj({
        "id": INTEGER, "title": STRING, "section": nullable(STRING), "category": nullable(STRING),
        "snippet": STRING, "similarity": nullable(NUMBER), "relevance": nullable(NUMBER),
        "relevance_kind": {"enum": ["similarity", "fused relevance", "lexical relevance"]}, "recency": NUMBER,
        "importance": NUMBER, "score": NUMBER, "created_at": TIMESTAMP, "explain": {"type": "object"},
    }, ["id", "title", "snippet", "score"]),
    "SearchResponse": obj({
        "query": STRING, "model": STRING, "mode": STRING, "degraded": nullable(STRING), "exact": BOOLEAN,
        "weights": WEIGHTS, "formula": STRING, "results": {"type": "array", "items": ref("SearchResult")},
        "lexical_query": nullable(STRING), "synonyms_used": {"type": "array"},
    }, ["query", "model", "mode", "degraded", "exact", "weights", "formula", "results"]),
    "Stats": obj({"articles": INTEGER, "embedded": INTEGER, "pending": INTEGER, "stale": INTEGER, "model": STRING,
                  "index": nullable(obj({"name": STRING, "definition": STRING}))},
                 ["articles", "embedded", "pending", "stale", "model", "index"]),
    "TicketCreate": obj({
        "subject": text(SUBJECT_MAX), "body": text(BODY_MAX),
        "email": nullable({"type": "string", "maxLength": EMAIL_MAX, "pattern": EMAIL_PATTERN}),
    }, ["subject", "body"], closed=True),
    "Feedback": obj({"ticket_id": INTEGER, "helpful": BOOLEAN, "comment": nullable(STRING),
                     "created_at": TIMESTAMP}, ["ticket_id", "helpful", "comment", "created_at"]),
    "FeedbackEnvelope": obj({"feedback": ref("Feedback")}, ["feedback"]),
    "FeedbackCreate": obj({"helpful": BOOLEAN, "comment": nullable(
        {"type": "string", "maxLength": COMMENT_MAX, "pattern": NO_NUL_PATTERN})}, ["helpful"], closed=True),
    "Ticket": obj({
        "id": INTEGER, "subject": STRING, "body": STRING, "email": nullable(STRING),
        "status": {"enum": list(TICKET_STATUSES)}, "state": nullable({"enum": list(WORK_STATES)}),
        "created_at": TIMESTAMP, "answered_at": nullable(TIMESTAMP),
        "answer": nullable(STRING), "mode": nullable(STRING), "reason": nullable(STRING), "model": nullable(STRING),
        "error": nullable(STRING), "timings": {"type": "object"}, "tokens": {"type": "object"},
        "gate": nullable({"type": "object"}),
        "citations": {"type": "array", "items": obj({"article_id": nullable(INTEGER), "title": STRING,
                                                     "rank": INTEGER, "cited": BOOLEAN})},
        "feedback": {"type": "array", "items": obj({"helpful": BOOLEAN, "comment": nullable(STRING)})},
    }, ["id", "subject", "body", "status", "created_at", "answer", "citations", "feedback"]),
    "TicketCreated": obj({"ticket": ref("Ticket"), "secret": {"type": "string", "minLength": 16}},
                         ["ticket", "secret"]),
    "TicketEnvelope": obj({"ticket": ref("Ticket")}, ["ticket"]),
    "TicketPage": obj({"tickets": {"type": "array", "items": ref("Ticket")}, **PAGE_FIELDS},
                      ["tickets", *PAGE_FIELDS]),
    "Gaps": obj({"days": INTEGER, "groups": {"type": "array", "items": obj({
        "nearest_article": nullable({"type": "object"}), "label": STRING, "tickets": INTEGER, "needs_agent": INTEGER,
        "not_helpful": INTEGER, "mean_similarity": nullable(NUMBER), "examples": {"type": "array"}})}},
        ["days", "groups"]),
    "PreviewRequest": obj({
        "query": text(QUERY_MAX), "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX},
        "article_id": nullable({"type": "integer"}),
    }, ["query"], closed=True),
    "Preview": obj({"query": STRING, "mode": STRING, "degraded": nullable(STRING), "limit": INTEGER,
                    "weights": WEIGHTS, "now": TIMESTAMP, "results": {"type": "array"},
                    "article": nullable({"type": "object"})}, ["query", "mode", "results", "article"]),
    "WorkTicket": {"allOf": [ref("Ticket"), obj({
        "assignee": nullable(STRING), "opened_at": nullable(TIMESTAMP), "due_at": nullable(TIMESTAMP),
        "overdue": BOOLEAN}, ["assignee", "due_at", "overdue"])]},
    "WorkTicketPage": obj({"tickets": {"type": "array", "items": ref("WorkTicket")}, **PAGE_FIELDS},
                          ["tickets", *PAGE_FIELDS]),
    "WorkTicketEnvelope": obj({"ticket": ref("WorkTicket")}, ["ticket"]),
    "Message": obj({
        "id": INTEGER, "ticket_id": INTEGER, "kind": {"enum": list(MESSAGE_KINDS)}, "author": nullable(STRING),
        "channel": {"enum": list(CHANNELS)}, "body": STRING, "email_message_id": nullable(STRING),
        "created_at": TIMESTAMP, "edit_ratio": nullable(NUMBER),
        "email": {"enum": ["queued", "sent", "failed", "none"]},
        "email_error": nullable({**STRING, "description": "why the e-mail failed (or the last attempt, while queued)"}),
        "email_outbox_id": nullable({**INTEGER, "description": "for POST /api/mail/outbox/{outbox_id}/retry"}),
        "attachments": {"type": "array", "items": ref("Attachment")},
    }, ["id", "ticket_id", "kind", "author", "channel", "body", "created_at", "email"]),
    "Attachment": obj({"id": INTEGER, "filename": STRING, "size": INTEGER, "content_type": STRING,
                       "sha256": STRING, "url": STRING}, ["id", "filename", "size", "content_type", "url"]),
    "MessageList": obj({"messages": {"type": "array", "items": ref("Message")}}, ["messages"]),
    "ReplyCreate": obj({"body": text(BODY_MAX), "internal": BOOLEAN, "status": {"enum": list(WORK_STATES)},
                        "attachments": {"type": "array", "items": ref("ReplyAttachment"),
                                        "maxItems": Settings.reply_attachments_max_files}},
                       ["body"], closed=True),
    "ReplyAttachment": {**obj({
        "filename": text(FILENAME_MAX),
        "content_type": {"type": "string", "maxLength": 200, "pattern": NO_NUL_PATTERN,
                         "description": "e.g. application/pdf (else application/octet-stream)"},
        "content_base64": {"type": "string", "minLength": 4,
                           "maxLength": 4 * -(-Settings.reply_attachment_max_bytes // 3),  # base64 of the cap
                           "pattern": BASE64_PATTERN, "description": "the file's bytes in standard, padded base64"},
    }, ["filename", "content_base64"], closed=True), "description": (
        "a file sent with the reply as a MIME part; caps: REPLY_ATTACHMENT_MAX_BYTES, REPLY_ATTACHMENTS_MAX_BYTES, "
        "REPLY_ATTACHMENTS_MAX_FILES")},
    "ReplyCreated": obj({"message": ref("Message"), "state": nullable({"enum": list(WORK_STATES)}),
                         "attachments": {**INTEGER, "description": "files stored with the message"}},
                        ["message", "state"]),
    "MailEnvelope": obj({"mail": obj({
        "id": INTEGER, "status": {"enum": ["queued", "sent", "failed"]}, "attempts": INTEGER,
        "error": nullable(STRING), "to": STRING}, ["id", "status", "attempts", "error", "to"])}, ["mail"]),
    "Assign": obj({"assignee": nullable({"type": "string", "minLength": 1, "maxLength": 64,
                                         "pattern": NO_NUL_PATTERN})}, ["assignee"], closed=True),
    "Draft": obj({"draft": STRING, "citations": {"type": "array", "items": {"oneOf": [
        obj({"number": INTEGER, "article_id": INTEGER, "title": STRING, "section": nullable(STRING), "url": STRING},
            ["number", "article_id", "title", "url"]),
        obj({"number": INTEGER, "ticket_id": INTEGER, "title": STRING, "url": STRING},
            ["number", "ticket_id", "title", "url"])]}},
        "mode": {"enum": ["llm", "extractive", "none"]}, "id": INTEGER, "grounded": BOOLEAN,
        "notice": nullable(STRING),
        # Issue 34: articles near the question under the answer gate: shown as nearest, never cited.
        "nearest": {"type": "array", "items": obj({"article_id": INTEGER, "title": STRING, "section": nullable(STRING),
                                                   "similarity": nullable({"type": "number"})},
                                                  ["article_id", "title", "similarity"])}},
        ["draft", "citations", "grounded"]),
    "DraftRequest": obj({"instruction": {"type": "string", "maxLength": 500, "pattern": NO_NUL_PATTERN,
                                         "description": "e.g. 'shorter' (language model only)"}}, [], closed=True),
    # Issue 25 (agent-work): the composer saved as typed, similar solved tickets.
    "ComposerSave": obj({"body": {"type": "string", "maxLength": BODY_MAX, "pattern": NO_NUL_PATTERN},
                         "after_message_id": {"type": "integer", "minimum": 0}}, ["body"], closed=True),
    "ComposerEnvelope": obj({"composer": obj({"body": STRING, "updated_at": nullable(TIMESTAMP)},
                                             ["body", "updated_at"])}, ["composer"]),
    "SimilarTickets": obj({"tickets": {"type": "array", "items": obj({
        "ticket_id": INTEGER, "similarity": NUMBER, "question": STRING, "reply": STRING, "solved_at": TIMESTAMP},
        ["ticket_id", "similarity", "question", "reply", "solved_at"])}}, ["tickets"]),
    "InboundOutcome": obj({"outcome": obj({
        "action": {"enum": ["follow_up", "new_ticket", "duplicate", "ignored", "quarantined"]},
        "ticket_id": nullable(INTEGER), "reason": STRING}, ["action", "ticket_id", "reason"])}, ["outcome"]),
    "Health": obj({"status": {"const": "ok"}, "database": {"const": "ok"}}, ["status", "database"]),
    **LEARNING_SCHEMAS,
}
