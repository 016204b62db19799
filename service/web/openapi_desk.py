"""The OpenAPI operations and schemas of the agents' team work (service/web/desk.py), kept beside the rest."""

from __future__ import annotations

from typing import Any

from service.db.models import TICKET_STATUSES, WORK_STATES
from service.tickets.desk import BULK_ACTIONS, BULK_MAX, QUEUES
from service.tickets.tags import TAGS_MAX
from service.tickets.validation import COMMENT_MAX
from service.web.openapi_schemas import BOOLEAN, INTEGER, NO_NUL_PATTERN, NUMBER, STRING, TIMESTAMP, nullable, obj, \
    ref

TAG = {"type": "string", "pattern": "^\\s*[A-Za-z0-9][A-Za-z0-9_-]{0,39}\\s*$"}
DAY = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "format": "date"}
VIEWER = obj({"username": STRING, "name": STRING, "activity": {"enum": ["viewing", "replying"]}},
             ["username", "name", "activity"])
CSAT_ROW = obj({"label": STRING, "good": INTEGER, "bad": INTEGER, "score": nullable(NUMBER)},
               ["label", "good", "bad", "score"])

DESK_SCHEMAS: dict[str, Any] = {
    "DeskTicket": {"allOf": [ref("WorkTicket"), obj({"tags": {"type": "array", "items": STRING},
                                                     "unread": BOOLEAN}, ["tags", "unread"])]},
    "DeskTicketPage": obj({"tickets": {"type": "array", "items": ref("DeskTicket")}, "page": INTEGER,
                           "per_page": INTEGER, "total": INTEGER, "pages": INTEGER},
                          ["tickets", "page", "per_page", "total", "pages"]),
    "TagsUpdate": obj({"tags": {"type": "array", "items": TAG, "maxItems": TAGS_MAX}}, ["tags"], closed=True),
    "Tags": obj({"ticket_id": INTEGER, "tags": {"type": "array", "items": STRING}}, ["ticket_id", "tags"]),
    "BulkAction": obj({"ids": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
                               "minItems": 1, "maxItems": BULK_MAX},
                       "action": {"enum": list(BULK_ACTIONS)},
                       "assignee": nullable({"type": "string", "minLength": 1, "maxLength": 64,
                                             "pattern": NO_NUL_PATTERN})}, ["ids", "action"], closed=True),
    "BulkResult": obj({"changed": {"type": "array", "items": INTEGER}}, ["changed"]),
    "PresenceBeat": obj({"activity": {"enum": ["viewing", "replying"]}}, ["activity"], closed=True),
    "Presence": obj({"viewers": {"type": "array", "items": VIEWER},
                     "latest_public_message_id": nullable(INTEGER)}, ["viewers", "latest_public_message_id"]),
    "CustomerHistory": obj({"tickets": {"type": "array", "items": obj({
        "id": INTEGER, "subject": STRING, "state": nullable({"enum": list(WORK_STATES)}),
        "status": {"enum": list(TICKET_STATUSES)}, "created_at": TIMESTAMP},
        ["id", "subject", "state", "status", "created_at"])}}, ["tickets"]),
    "RatingCreate": obj({"rating": {"enum": ["good", "bad"]},
                         "comment": nullable({"type": "string", "maxLength": COMMENT_MAX, "pattern": NO_NUL_PATTERN})},
                        ["rating"], closed=True),
    "RatingEnvelope": obj({"rating": obj({"ticket_id": INTEGER, "rating": {"enum": ["good", "bad"]},
                                          "comment": nullable(STRING)}, ["ticket_id", "rating", "comment"])},
                          ["rating"]),
    "Csat": obj({"days": INTEGER, "by_agent": {"type": "array", "items": CSAT_ROW},
                 "by_solver": {"type": "array", "items": CSAT_ROW}}, ["days", "by_agent", "by_solver"]),
}


def desk_list_parameters(query) -> list[dict[str, Any]]:
    """The ticket list's query parameters (``query`` builds one, as in service.web.openapi)."""
    text = {"type": "string", "maxLength": 200, "pattern": "^[^\\u0000-\\u0008\\u000a-\\u001f\\u007f]*$"}
    return [query("queue", {"enum": list(QUEUES)}, "mine (open and pending), unassigned, open, pending, solved, all "
                                                   "(default), overdue"),
            query("q", text, "full-text search over subject and thread (web-search syntax: \"a phrase\", -not, or), "
                             "or a customer's address (with an `@`: part of one, such as `@acme.com`)"),
            query("state", {"enum": [*WORK_STATES, "none"]}, "work state (none: no agent needed)"),
            query("assignee", text, "a username (an unknown one matches nothing), or `none`"),
            query("tag", text, "only tickets with this tag"),
            query("since", DAY, "created on or after this day (UTC)"),
            query("until", DAY, "created on or before this day (UTC)"),
            query("status", {"enum": list(TICKET_STATUSES)}, "the AI's status"),
            query("article_id", {"type": "integer", "minimum": 1, "maximum": 2**62}, "tickets that retrieved it"),
            query("customer", text, "only this customer's address (any case)")]


def desk_operations(query, path_id, secret_header) -> list[tuple]:
    """The operations, in service.web.openapi's tuple form."""
    ticket = [path_id("ticket_id")]
    return [
        ("/api/tickets/{ticket_id}/tags", "post", "desk_api.tags", "Replace the ticket's tags", "TagsUpdate",
         ("200", "Tags"), ticket),
        ("/api/tickets/bulk", "post", "desk_api.bulk",
         "Assign (to `assignee`; none given: to me; null: unassign) or solve many tickets at once", "BulkAction",
         ("200", "BulkResult"), []),
        ("/api/tickets/{ticket_id}/presence", "get", "desk_api.presence_show",
         "Other agents on the ticket now, and the newest public message's id", None, ("200", "Presence"), ticket),
        ("/api/tickets/{ticket_id}/presence", "put", "desk_api.presence_beat",
         "Heartbeat: I am viewing or replying (a logged-in agent, a token gets 403; expires after PRESENCE_SECONDS)",
         "PresenceBeat", ("200", "Presence"), ticket),
        ("/api/tickets/{ticket_id}/presence", "delete", "desk_api.presence_leave", "I left the ticket's page",
         None, ("204", None), ticket),
        ("/api/tickets/{ticket_id}/history", "get", "desk_api.history",
         "The other tickets from the same customer address", None, ("200", "CustomerHistory"), ticket),
        ("/api/tickets/{ticket_id}/rating", "post", "desk_api.rating",
         "The customer's rating of a solved ticket (X-Ticket-Secret); a second replaces the first; 409 if not solved",
         "RatingCreate", ("200", "RatingEnvelope"), [*ticket, secret_header]),
        ("/api/reports/csat", "get", "desk_api.csat", "CSAT by agent, and AI-only vs agent-solved", None,
         ("200", "Csat"), [query("days", {"type": "integer", "minimum": 1, "maximum": 3650}, "look back")]),
    ]
