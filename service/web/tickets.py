"""HTTP API for tickets, feedback and the content-gap report."""

from __future__ import annotations

from flask import Blueprint, g, jsonify, request, url_for

from service.tickets.queries import add_feedback, content_gaps, get_ticket, list_tickets
from service.tickets.secrets import new_ticket_secret
from service.tickets.workflow import answer_ticket
from service.web.requests import db, int_arg, json_body, page_count, runtime

tickets_api = Blueprint("tickets_api", __name__, url_prefix="/api")
TICKET_FIELDS = ("subject", "body", "email")
FEEDBACK_FIELDS = ("helpful", "comment")
SECRET_HEADER = "X-Ticket-Secret"


@tickets_api.post("/tickets")
def tickets_create():
    """Store and answer a ticket; 201 with status, answer, mode, cited articles and the ticket's secret.

    The secret is shown once: it is the submitter's proof for feedback and the customer's ticket page.
    """
    rt = runtime()
    secret, digest = new_ticket_secret()
    ticket_id = answer_ticket(rt, rt.chat, json_body(TICKET_FIELDS), secret_sha256=digest)
    view = get_ticket(db(), ticket_id)
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
    """Newest first; ``?status=needs_agent&article_id=&page=&per_page=``."""
    page = int_arg("page", 1, low=1, high=1_000_000)
    per_page = int_arg("per_page", 20, low=1, high=100)
    article_id = int_arg("article_id", 0, low=1, high=2**62) if "article_id" in request.args else None
    items, total = list_tickets(db(), status=request.args.get("status") or None, article_id=article_id,
                                page=page, per_page=per_page)
    return jsonify({"tickets": [t.to_dict() for t in items], "page": page, "per_page": per_page,
                    "total": total, "pages": page_count(total, per_page)})


@tickets_api.post("/tickets/<int:ticket_id>/feedback")
def tickets_feedback(ticket_id: int):
    """``{helpful, comment?}`` → 201; from an admin, or the submitter sending the ticket's secret in X-Ticket-Secret."""
    feedback = add_feedback(db(), ticket_id, json_body(FEEDBACK_FIELDS), secret=request.headers.get(SECRET_HEADER),
                            trusted=g.get("identity") is not None)
    db().commit()
    return jsonify({"feedback": feedback}), 201


@tickets_api.get("/reports/gaps")
def reports_gaps():
    """Recent handed-off or unhelpful tickets grouped by nearest article: what to write next."""
    days = int_arg("days", 30, low=1, high=3650)
    limit = int_arg("limit", 20, low=1, high=200)
    return jsonify({"days": days, "groups": content_gaps(db(), days=days, limit=limit)})
