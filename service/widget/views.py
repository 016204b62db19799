"""The widget's HTTP side: the loader script, the iframe page, and its JSON/SSE API under /widget/api.

Every API call but the first carries the visitor token in ``X-Widget-Token``; a forged, expired or replayed one is
a 401. The frame's fetches omit cookies, so a logged-in admin's session never turns a visitor's call into theirs.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from flask import Blueprint, Response, current_app, render_template, request, stream_with_context

from service.tickets.helpdesk import escalate, ticket_fields, ticket_reference
from service.tickets.notifications import notify_unassigned
from service.tickets.secrets import new_ticket_secret
from service.tickets.validation import BODY_MAX, is_email
from service.tickets.work import acknowledge
from service.tickets.workflow import answer_ticket
from service.db.models import Ticket
from service.web.errors import ApiError
from service.web.limits import count_hit, too_many
from service.web.links import article_link_for_this_page, ticket_link
from service.web.requests import json_body, runtime
from service.widget.answering import AnswerRecord, answer_events
from service.widget.conversations import (
    ConversationNotFound,
    add_chat_message,
    agent_replies,
    chat_messages,
    earlier_questions,
    find_conversation,
    record_helpful,
    resume_conversation,
    start_conversation,
    transcript,
    user_tickets,
)
from service.widget.identity import IdentityRefused, verify_visitor
from service.widget.locales import all_locales, pick_locale, strings
from service.widget.tokens import issue_token, read_token

widget = Blueprint("widget", __name__, template_folder="templates")
TOKEN_HEADER = "X-Widget-Token"
COLOR = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?")
QUESTION_MAX = 2000
LOCALE = re.compile(r"[A-Za-z_-]{0,20}")
IDENTITY_FIELDS = frozenset({"user_id", "user_hash", "email", "name"})


def frame_csp(origins: tuple[str, ...]) -> str:
    """The iframe page's policy: its own files only, framed by this app and the allowed sites alone."""
    ancestors = " ".join(("'self'", *origins))
    return (f"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            f"frame-ancestors {ancestors}; form-action 'self'; base-uri 'none'; object-src 'none'")


def _secret_key() -> str | bytes:
    """The app's signing key (settings, or the one kept in app_state), loaded once per process."""
    current_app.session_interface.get_signing_serializer(current_app)  # loads the key when not yet loaded
    return current_app.secret_key


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message)


def _visitor_token():
    token = request.headers.get(TOKEN_HEADER, "")
    return read_token(_secret_key(), token, runtime().settings.widget_token_seconds) if token else None


def _conversation(session, *, lock: bool = False):
    """The caller's conversation, or 401 (no token, forged, expired or replayed)."""
    try:
        conversation = find_conversation(session, _visitor_token(), lock=lock)
    except ConversationNotFound:
        raise _unauthorized("the visitor token is missing, invalid, expired or replaced; start the chat again")
    if runtime().settings.widget_identity_required and conversation.user_id is None:
        raise _unauthorized("this site's chat is for signed-in users only")
    return conversation


def _limit_visitor(session, conversation_id: int) -> None:
    """Per visitor (the per-address budget is counted before the view, in service.web.limits)."""
    limit = runtime().settings.rate_limit_widget
    if limit is None:
        return
    count = count_hit(session, f"widget-visitor:{conversation_id}", limit[1])
    if count.hits > limit[0]:
        raise too_many("messages from this conversation", limit, count.retry_after)


def _citation_links(citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each cited article's help-center page, at the matched section."""
    return [c | {"url": article_link_for_this_page(c["article_id"], c["section"])} for c in citations]


@widget.get("/widget.js")
def loader():
    """The one tag a site adds: a launcher button and the iframe (no framework, never blocks the page)."""
    launcher = {code: {"launcher": s["launcher"], "close": s["close"], "frame_title": s["frame_title"]}
                for code, s in all_locales().items()}
    body = render_template("widget/loader.js", strings=json.dumps(launcher, ensure_ascii=False))
    response = Response(body, mimetype="application/javascript")
    response.headers["Cache-Control"] = "public, max-age=300"
    response.headers["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response


@widget.get("/widget")
def frame():
    """The chat panel, framed by an allowed site (CSP frame-ancestors) or by the admin's preview."""
    settings = runtime().settings
    locale = pick_locale(request.args.get("locale"), request.headers.get("Accept-Language"))
    brand = settings.brand  # the site's data-title / data-color first, then the help center's brand (issue 37)
    color = request.args.get("color") or brand.color or ""
    title = request.args.get("title") or brand.name or ""
    page = render_template(
        "widget/frame.html", s=strings(locale), locale=locale, title=title[:80],
        color=color if COLOR.fullmatch(color) else "", origins=" ".join(settings.widget_allowed_origins),
        identity_required=settings.widget_identity_required)
    response = Response(page, mimetype="text/html")
    response.headers["Content-Security-Policy"] = frame_csp(settings.widget_allowed_origins)
    response.headers["Cache-Control"] = "no-store"
    return response


def _checked_locale(raw: Any) -> str | None:
    if raw is None or (isinstance(raw, str) and LOCALE.fullmatch(raw)):
        return raw
    raise ApiError(400, "validation_error", "locale must be a language code such as en or de-AT",
                   {"locale": "a language code"})


def _checked_identity(raw: Any) -> dict[str, str | None] | None:
    """``identify``'s fields: null, or an object of the four fields, each a string or null (else 400)."""
    if raw is None:
        return None
    if isinstance(raw, dict) and set(raw) <= IDENTITY_FIELDS and all(v is None or isinstance(v, str)
                                                                      for v in raw.values()):
        return raw
    raise ApiError(400, "validation_error", "identity must be null or an object of user_id, user_hash, email and "
                   "name strings", {"identity": "user_id, user_hash, email, name: strings or null"})


@widget.post("/widget/api/session")
def session_start():
    """Start (or, with a token, resume under a new token) the visitor's conversation; its messages so far."""
    settings = runtime().settings
    body = json_body({"locale", "identity"})
    locale = pick_locale(_checked_locale(body.get("locale")))
    identity = _checked_identity(body.get("identity"))
    with runtime().session() as session:
        if request.headers.get(TOKEN_HEADER):
            try:
                conversation = resume_conversation(session, _visitor_token())
            except ConversationNotFound:
                raise _unauthorized("the visitor token is invalid, expired or replaced; start the chat again")
        else:
            try:
                visitor = verify_visitor(identity, secret=settings.widget_identity_secret,
                                         required=settings.widget_identity_required)
            except IdentityRefused as exc:
                raise _unauthorized(str(exc))
            conversation = start_conversation(session, visitor, locale)
        if settings.widget_identity_required and conversation.user_id is None:
            raise _unauthorized("this site's chat is for signed-in users only")
        token = issue_token(_secret_key(), conversation.id, conversation.token_generation)
        messages = [m.to_dict() for m in chat_messages(session, conversation)]
        answer = {"token": token, "locale": conversation.locale, "verified": conversation.user_id is not None,
                  "email": conversation.email is not None,
                  "ticket": ticket_reference(conversation.ticket_id) if conversation.ticket_id else None,
                  "tickets": user_tickets(session, conversation.user_id)}
    for message in messages:
        message["citations"] = _citation_links(message["citations"])
    return answer | {"messages": messages}


# What a visitor's ``gate`` event carries. The stored gate (widget_messages.gate) keeps the rest for the team: the
# reason names a reviewed ticket when one decided (service.gate.memory), and features and confidence are tuning data.
PUBLIC_GATE_FIELDS = ("answerable", "degraded")


def _sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@widget.post("/widget/api/ask")
def ask():
    """The answer as Server-Sent Events: ``gate``, ``delta``…, ``citations``, ``done`` (with the answer's id)."""
    body = json_body({"question"})
    question = body.get("question")
    if not isinstance(question, str) or not question.strip() or len(question) > QUESTION_MAX or "\x00" in question:
        raise ApiError(400, "validation_error", f"question must be 1 to {QUESTION_MAX} characters",
                       {"question": f"must be 1 to {QUESTION_MAX} characters"})
    question = question.strip()
    rt = runtime()
    with rt.session() as session:
        conversation = _conversation(session)
        _limit_visitor(session, conversation.id)
        earlier = earlier_questions(session, conversation.id)
        add_chat_message(session, conversation.id, "visitor", question)
        conversation_id, handoff = conversation.id, strings(conversation.locale)["handoff_answer"]

    def events() -> Iterator[str]:
        record = AnswerRecord()
        try:
            for event in answer_events(rt, question, earlier, record, handoff):
                data = event.data
                if event.kind == "citations":
                    data = {"citations": _citation_links(data["citations"])}
                elif event.kind == "gate":  # the decision only: the reason and evidence are the team's
                    data = {key: data[key] for key in PUBLIC_GATE_FIELDS if key in data}
                yield _sse(event.kind, data)
        except Exception:  # noqa: BLE001 - the stream has started: report in-band, never a broken connection
            current_app.logger.exception("widget answer failed")
            yield _sse("error", {"message": "the answer failed; try again"})
            return
        with rt.session() as session:
            message_id = add_chat_message(session, conversation_id, "assistant", record.text,
                                          citations=record.citations, gate=record.gate)
        yield _sse("done", {"message_id": f"m{message_id}", "answered": record.answered})

    response = Response(stream_with_context(events()), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


@widget.get("/widget/api/messages")
def messages():
    """Agents' replies after ``after`` (a thread id; 0 = all): the widget polls this, and resyncs with 0."""
    raw = request.args.get("after", "0")
    after = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else 0
    with runtime().session() as session:
        conversation = _conversation(session)
        replies = [m.to_dict() for m in agent_replies(session, conversation, after=after)]
    return {"messages": replies}


@widget.post("/widget/api/handoff")
def handoff():
    """"Talk to a person": a ticket holding the transcript, sent to an agent who replies here and by e-mail."""
    body = json_body({"email"})
    rt = runtime()
    settings = rt.settings
    with rt.session() as session:
        conversation = _conversation(session, lock=True)
        _limit_visitor(session, conversation.id)
        if conversation.ticket_id is not None:
            return {"ticket": ticket_reference(conversation.ticket_id), "created": False}
        email = body.get("email") if isinstance(body.get("email"), str) and body.get("email").strip() \
            else conversation.email
        if not is_email(email):
            raise ApiError(400, "validation_error", "an e-mail address is needed so a person can reply",
                           {"email": "must be an email address"})
        email = email.strip()
        conversation_id = conversation.id
        first = earlier_questions(session, conversation_id, limit=1000)
        chat = transcript(session, conversation_id)
    opening = first[0] if first else "The visitor asked to talk to a person"
    description = f"{opening}\n\n--- Chat widget transcript ---\n\n{chat or '(no messages yet)'}"[:BODY_MAX]
    secret, digest = new_ticket_secret()
    ticket_id = answer_ticket(rt, rt.chat, ticket_fields(description), secret_sha256=digest, channel="web")
    with rt.session() as session:
        escalate(session, ticket_id, secret, email=email, asked_for_person=True,
                 first_response_hours=settings.first_response_hours)
        acknowledge(session, settings, ticket_id, link=ticket_link(ticket_id, secret), answer=None)
        notify_unassigned(session, settings, session.get(Ticket, ticket_id))
        conversation = find_conversation(session, _visitor_token(), lock=True)
        conversation.ticket_id, conversation.email = ticket_id, email
    return {"ticket": ticket_reference(ticket_id), "created": True}, 201


@widget.post("/widget/api/feedback")
def feedback():
    """"Did this answer your question?" on one of the conversation's answers."""
    body = json_body({"message_id", "helpful"})
    message_id, helpful = body.get("message_id"), body.get("helpful")
    if not isinstance(message_id, str) or not re.fullmatch(r"m[0-9]{1,18}", message_id) \
            or not isinstance(helpful, bool):
        raise ApiError(400, "validation_error", "send message_id (\"m<id>\") and helpful (true or false)",
                       {"message_id": "an answer's id", "helpful": "true or false"})
    with runtime().session() as session:
        conversation = _conversation(session)
        if not record_helpful(session, conversation.id, int(message_id[1:]), helpful):
            raise ApiError(404, "not_found", "no such answer in this conversation")
    return {"message_id": message_id, "helpful": helpful}
