"""The OpenAPI operations and schemas of the chat widget (service/widget), kept beside the rest."""

from __future__ import annotations

from typing import Any

from service.web.openapi_schemas import BOOLEAN, INTEGER, NO_NUL_PATTERN, STRING, nullable, obj

TOKEN_HEADER = {"name": "X-Widget-Token", "in": "header", "required": True, "schema": {"type": "string"},
                "description": "the visitor token from `POST /widget/api/session` (signed, expiring; only the "
                               "newest one of a conversation works)"}
CITATION = obj({"number": INTEGER, "article_id": INTEGER, "title": STRING, "section": nullable(STRING),
                "url": STRING}, ["number", "article_id", "title", "url"])
CHAT_MESSAGE = obj({"id": STRING, "role": {"enum": ["visitor", "assistant", "agent"]}, "body": STRING,
                    "citations": {"type": "array", "items": CITATION}}, ["id", "role", "body", "citations"])
FIELD = nullable({"type": "string", "maxLength": 200, "pattern": "^[^\\u0000-\\u001f]*$"})
IDENTITY = nullable(obj({"user_id": FIELD, "user_hash": FIELD, "email": FIELD, "name": FIELD}, closed=True))
LOCALE = nullable({"type": "string", "maxLength": 20, "pattern": "^[A-Za-z_-]*$"})

WIDGET_SCHEMAS: dict[str, Any] = {
    "WidgetSessionStart": obj({"locale": LOCALE, "identity": IDENTITY}, closed=True),
    "WidgetSession": obj({"token": STRING, "locale": STRING, "verified": BOOLEAN, "email": BOOLEAN,
                          "ticket": nullable(STRING), "messages": {"type": "array", "items": CHAT_MESSAGE},
                          "tickets": {"type": "array", "items": obj({"reference": STRING, "subject": STRING,
                                                                     "state": STRING},
                                                                    ["reference", "subject", "state"])}},
                         ["token", "locale", "verified", "email", "ticket", "messages", "tickets"]),
    "WidgetQuestion": obj({"question": {"type": "string", "minLength": 1, "maxLength": 2000,
                                        "pattern": NO_NUL_PATTERN}}, ["question"], closed=True),
    "WidgetMessages": obj({"messages": {"type": "array", "items": CHAT_MESSAGE}}, ["messages"]),
    "WidgetHandoff": obj({"email": nullable(STRING)}, closed=True),
    "WidgetTicket": obj({"ticket": STRING, "created": BOOLEAN}, ["ticket", "created"]),
    "WidgetFeedback": obj({"message_id": {"type": "string", "pattern": "^m[0-9]{1,18}$"}, "helpful": BOOLEAN},
                          ["message_id", "helpful"], closed=True),
}


def widget_operations(query) -> list[tuple]:
    """The operations, in service.web.openapi's tuple form."""
    token = [TOKEN_HEADER]
    text = {"type": "string", "maxLength": 80, "pattern": "^[^\\u0000-\\u001f\\u007f]*$"}
    return [
        ("/widget.js", "get", "widget.loader", "The embed script (JavaScript): a launcher button and the iframe",
         None, ("200", None), []),
        ("/widget", "get", "widget.frame", "The chat panel (HTML) the script frames; CSP frame-ancestors lists "
         "WIDGET_ALLOWED_ORIGINS", None, ("200", None),
         [query("locale", text, "a shipped locale (en, de); else the browser's language"),
          query("title", text, "the panel's heading"), query("color", text, "accent colour, #rgb or #rrggbb")]),
        ("/widget/api/session", "post", "widget.session_start",
         "Start a conversation (identity checked: 401 for a wrong user_hash, or none when required), or resume one "
         "with X-Widget-Token under a new token", "WidgetSessionStart", ("200", "WidgetSession"), []),
        ("/widget/api/ask", "post", "widget.ask", "The answer as Server-Sent Events (text/event-stream): gate, "
         "delta…, citations, done", "WidgetQuestion", ("200", None), token),
        ("/widget/api/messages", "get", "widget.messages", "Agents' replies after a thread id (poll; 0 resyncs)",
         None, ("200", "WidgetMessages"),
         [*token, query("after", {"type": "integer", "minimum": 0}, "the last agent reply's id seen")]),
        ("/widget/api/handoff", "post", "widget.handoff", "Talk to a person: a ticket with the transcript (needs an "
         "e-mail unless one is known)", "WidgetHandoff", ("201", "WidgetTicket"), token),
        ("/widget/api/feedback", "post", "widget.feedback", "Did this answer your question?", "WidgetFeedback",
         ("200", "WidgetFeedback"), token),
    ]
