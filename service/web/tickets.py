"""HTTP API for tickets, feedback and the content-gap report."""

from __future__ import annotations

import logging

from flask import Blueprint, g, jsonify, request, url_for

from service.accounts import user_id_for
from service.tickets.attachments import attachments_by_message
from service.tickets.drafts import draft_signer, latest_draft, make_draft, signed_by, stored_draft_view
from service.tickets.idempotency import KeyReused, check_key, claim_key, fingerprint, record_response
from service.tickets.queries import add_feedback, content_gaps, get_ticket
from service.tickets.secrets import new_ticket_secret
from service.tickets.solving import solve_ticket
from service.tickets.states import Actor
from service.tickets.thread import ticket_thread
from service.mail.outbox import mail_states
from service.tickets.work import REPLY_FIELDS, acknowledge, assign_ticket, forgo_acknowledgement, send_reply, work_ticket
from service.tickets.workflow import answer_ticket
from service.web.attachments import attachment_url
from service.web.desk import tickets_page
from service.web.errors import ApiError
from service.web.limits import acknowledgement_allowed
from service.web.links import article_link
from service.web.requests import db, int_arg, json_body, runtime

log = logging.getLogger(__name__)
tickets_api = Blueprint("tickets_api", __name__, url_prefix="/api")
TICKET_FIELDS = ("subject", "body", "email")
FEEDBACK_FIELDS = ("helpful", "comment")
DRAFT_FIELDS = ("instruction",)
SECRET_HEADER = "X-Ticket-Secret"
IDEMPOTENCY_HEADER = "Idempotency-Key"


@tickets_api.post("/tickets")
def tickets_create():
    """Store and answer a ticket; 201 with status, answer, mode, cited articles and the ticket's secret.

    The secret is shown once: it is the submitter's proof for feedback and the customer's ticket page.
    """
    rt = runtime()
    secret, digest = new_ticket_secret()
    ticket_id = answer_ticket(rt, rt.chat, json_body(TICKET_FIELDS), secret_sha256=digest)
    view = get_ticket(db(), ticket_id)
    # Owed with the stored ticket (ack_pending): queued now (or escalated when suppressed); a crash before this
    # commit leaves it owed, and the recovery sweep completes it.
    if acknowledgement_allowed():
        acknowledge(db(), rt.settings, ticket_id, answer=view.answer if view.status == "answered" else None)
    else:
        forgo_acknowledgement(db(), ticket_id)  # the client's limit said no: the sweep must not send it later
    db().commit()
    shown = view.to_dict() if g.get("identity") is not None else view.to_public_dict()
    response = jsonify({"ticket": shown, "secret": secret})
    response.status_code = 201
    response.headers["Location"] = url_for("tickets_api.tickets_show", ticket_id=ticket_id)
    return response


@tickets_api.get("/tickets/<int:ticket_id>")
def tickets_show(ticket_id: int):
    """One ticket with answer, citations (score breakdown at answer time) and feedback."""
    return jsonify({"ticket": get_ticket(db(), ticket_id).to_dict()})


@tickets_api.get("/tickets")
def tickets_index():
    """A queue (default ``all``, newest first; work queues by due time), searched with ``q`` and filtered."""
    return tickets_page()


@tickets_api.post("/tickets/<int:ticket_id>/feedback")
def tickets_feedback(ticket_id: int):
    """``{helpful, comment?}`` → 201; from an admin, or the submitter sending the ticket's secret in X-Ticket-Secret.

    An agent is no admin here: the answer's feedback is the customer's to give, so an agent needs the secret too.
    """
    identity = g.get("identity")
    feedback = add_feedback(db(), ticket_id, json_body(FEEDBACK_FIELDS), secret=request.headers.get(SECRET_HEADER),
                            trusted=identity is not None and identity.role == "admin")
    db().commit()
    return jsonify({"feedback": feedback}), 201


@tickets_api.get("/reports/gaps")
def reports_gaps():
    """Recent handed-off or unhelpful tickets grouped by nearest article: what to write next."""
    days = int_arg("days", 30, low=1, high=3650)
    limit = int_arg("limit", 20, low=1, high=200)
    return jsonify({"days": days, "groups": content_gaps(db(), days=days, limit=limit)})


def _my_user_id() -> int | None:
    """The logged-in person's account id ("me"); a token is nobody."""
    identity = g.get("identity")
    return identity.id if identity is not None and identity.kind == "session" else None


def _actor() -> Actor:
    return Actor("agent", _my_user_id())


@tickets_api.get("/tickets/<int:ticket_id>/messages")
def tickets_messages(ticket_id: int):
    """The whole thread, internal notes included, each public reply with its e-mail's state (and why it failed) and
    its attachments."""
    work_ticket(db(), ticket_id)
    states = mail_states(db(), ticket_id)
    files = attachments_by_message(db(), ticket_id)
    return jsonify({"messages": [m.to_dict() | _email_fields(states.get(m.email_message_id))
                                 | {"attachments": [a.to_dict(attachment_url(ticket_id, a)) for a in files.get(m.id, [])]}
                                 for m in ticket_thread(db(), ticket_id)]})


def _email_fields(state) -> dict:
    """``email`` (queued, sent, failed or none), ``email_error`` and the outbox id to retry a failed one."""
    if state is None:
        return {"email": "none", "email_error": None, "email_outbox_id": None}
    return {"email": state.status, "email_error": state.error, "email_outbox_id": state.outbox_id}


@tickets_api.get("/tickets/<int:ticket_id>/draft")
def tickets_draft(ticket_id: int):
    """The ticket's current AI draft (the newest one no reply used and no customer message overtook), signed by
    the caller; a 404 when there is none. Reading never writes: ``POST`` makes one."""
    ticket = work_ticket(db(), ticket_id)
    stored = latest_draft(db(), ticket_id)
    if stored is None:
        raise ApiError(404, "not_found", f"ticket {ticket_id} has no current draft: POST to this URL makes one")
    view = stored_draft_view(db(), stored, article_link)
    return jsonify(signed_by(view, draft_signer(db(), ticket, _my_user_id())).to_dict())


@tickets_api.post("/tickets/<int:ticket_id>/draft")
def tickets_draft_create(ticket_id: int):
    """Make (or remake) the ticket's AI draft: ``{instruction?}`` (with a language model) → 201, the draft."""
    rt = runtime()
    work_ticket(db(), ticket_id)
    body = json_body(DRAFT_FIELDS) if request.get_data() else {}
    draft = make_draft(db(), rt, rt.chat, ticket_id, link=article_link, instruction=body.get("instruction"),
                       user_id=_my_user_id())
    db().commit()
    response = jsonify(draft.to_dict())
    response.status_code = 201
    response.headers["Location"] = url_for("tickets_api.tickets_draft", ticket_id=ticket_id)
    return response


@tickets_api.post("/tickets/<int:ticket_id>/replies")
def tickets_replies(ticket_id: int):
    """``{body, internal?, status?, attachments?}`` → 201 ``{message}``; a public reply's e-mail is ``queued``.

    With an ``Idempotency-Key`` header, a repeat (or a racing duplicate) returns the first result and sends
    nothing (``Idempotent-Replayed: true``); the key with a different body is a 409.
    """
    fields = json_body(REPLY_FIELDS)
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is not None:
        work_ticket(db(), ticket_id)  # an unknown ticket is a 404 before any key is claimed
        try:
            earlier = claim_key(db(), ticket_id, check_key(key), fingerprint(fields))
        except KeyReused as exc:
            raise ApiError(409, "idempotency_key_reused", str(exc)) from exc
        if earlier is not None:
            db().rollback()
            return jsonify(earlier.body), earlier.status, {"Idempotent-Replayed": "true"}
    reply = send_reply(db(), runtime().settings, ticket_id, fields, agent=_actor(),
                       channel="web" if g.identity.kind == "session" else "api")
    body = {"message": reply.message.to_dict() | {"email": reply.email}, "state": reply.state,
            "attachments": reply.attachments}
    if key is not None:
        record_response(db(), ticket_id, key, 201, body)
    db().commit()
    if reply.state == "solved":
        learn_from_solved_ticket(ticket_id)
    return jsonify(body), 201


def learn_from_solved_ticket(ticket_id: int) -> None:
    """After the solve is committed: the one solved hook (service.tickets.solving)."""
    solve_ticket(runtime(), ticket_id)


@tickets_api.post("/tickets/<int:ticket_id>/assign")
def tickets_assign(ticket_id: int):
    """``{assignee}`` (a username, or null to unassign); an empty body assigns the ticket to the caller."""
    work_ticket(db(), ticket_id)
    body = json_body(("assignee",)) if request.get_data() else {}
    if "assignee" in body:
        name = body["assignee"]
        assignee = None if name is None else user_id_for(db(), name)
    elif (assignee := _my_user_id()) is None:
        raise ApiError(400, "validation_error", "a token is nobody: name the assignee",
                       {"assignee": "is required when calling with a token"})
    item = assign_ticket(db(), ticket_id, assignee)
    db().commit()
    return jsonify({"ticket": item.to_dict()})
