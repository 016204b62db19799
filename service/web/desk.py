"""HTTP API for the agents' team work: the one ticket list, tags, bulk actions, presence, the customer's history,
CSAT ratings and their report. Thin views: validate, call one use case, commit, return."""

from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from service.accounts import user_id_for
from service.tickets.desk import (
    UNASSIGNED,
    TicketFilters,
    bulk_update,
    clean_ticket_ids,
    customer_history,
    list_desk,
    parse_day,
)
from service.tickets.presence import beat, leave, presence
from service.tickets.ratings import RATING_FIELDS, RatingNotAllowed, csat_report, rate_ticket
from service.tickets.solving import solve_tickets
from service.tickets.states import Actor
from service.tickets.tags import set_tags
from service.tickets.work import work_ticket
from service.validation import ValidationError
from service.web.errors import ApiError
from service.web.requests import db, int_arg, json_body, page_count, runtime

desk_api = Blueprint("desk_api", __name__, url_prefix="/api")
SECRET_HEADER = "X-Ticket-Secret"
LIST_ARGUMENTS = ("queue", "q", "state", "assignee", "tag", "since", "until", "status", "article_id", "customer")


def my_user_id() -> int | None:
    """The logged-in person's account id ("me"); a token is nobody."""
    identity = g.get("identity")
    return identity.id if identity is not None and identity.kind == "session" else None


def _me_or_400() -> int:
    user_id = my_user_id()
    if user_id is None:
        raise ApiError(403, "forbidden", "presence is a person's: log in (a token is nobody)",
                       {"Authorization": "use a logged-in session"})
    return user_id


def _account_id(username: str) -> int:
    """The account's id; an unknown name filters to nothing (id 0 is nobody's) rather than failing the search."""
    try:
        return user_id_for(db(), username)
    except ValidationError:
        return 0


def filters_from(args) -> TicketFilters:
    """The list's filters from a query string (numbers through the one parser)."""
    assignee = args.get("assignee") or None
    assignee_id = None if assignee is None else UNASSIGNED if assignee == "none" else _account_id(assignee)
    return TicketFilters(
        queue=args.get("queue") or "all", q=(args.get("q") or "").strip() or None,
        state=args.get("state") or None, assignee_id=assignee_id, tag=args.get("tag") or None,
        since=parse_day("since", args.get("since")), until=parse_day("until", args.get("until")),
        status=args.get("status") or None,
        article_id=int_arg("article_id", 0, low=1, high=2**62) if args.get("article_id") else None,
        customer=(args.get("customer") or "").strip() or None)


def tickets_page():
    """``GET /api/tickets``: a queue (default ``all``), searched and filtered, one page."""
    page = int_arg("page", 1, low=1, high=1_000_000)
    per_page = int_arg("per_page", 20, low=1, high=100)
    items, total = list_desk(db(), filters_from(request.args), user_id=my_user_id(), page=page, per_page=per_page)
    return jsonify({"tickets": [item.to_dict() for item in items], "page": page, "per_page": per_page,
                    "total": total, "pages": page_count(total, per_page)})


@desk_api.post("/tickets/<int:ticket_id>/tags")
def tags(ticket_id: int):
    """``{tags: [...]}`` replaces the ticket's tags → ``{tags}``."""
    stored = set_tags(db(), ticket_id, json_body(("tags",)).get("tags"))
    db().commit()
    return jsonify({"ticket_id": ticket_id, "tags": stored})


@desk_api.post("/tickets/bulk")
def bulk():
    """``{ids, action: assign|solve, assignee?}`` → ``{changed: [ids]}``; assign with no assignee: to me."""
    body = json_body(("ids", "action", "assignee"))
    for ticket_id in clean_ticket_ids(body.get("ids")):
        work_ticket(db(), ticket_id)  # a missing ticket is a 404 before the assignee is looked at
    assignee_id = None
    if body.get("action") == "assign":
        name = body.get("assignee", ...)
        if name is ...:
            assignee_id = my_user_id()
            if assignee_id is None:
                raise ApiError(400, "validation_error", "a token is nobody: name the assignee",
                               {"assignee": "is required when calling with a token"})
        elif name is not None:
            assignee_id = user_id_for(db(), name)
    changed = bulk_update(db(), body.get("ids"), body.get("action"), agent=Actor("agent", my_user_id()),
                          assignee_id=assignee_id)
    db().commit()
    if body.get("action") == "solve":
        solve_tickets(runtime(), changed)
    return jsonify({"changed": changed})


@desk_api.get("/tickets/<int:ticket_id>/presence")
def presence_show(ticket_id: int):
    """The other agents on the ticket now, and the newest public message's id."""
    work_ticket(db(), ticket_id)
    return jsonify(presence(db(), ticket_id, my_user_id()).to_dict())


@desk_api.put("/tickets/<int:ticket_id>/presence")
def presence_beat(ticket_id: int):
    """``{activity: viewing|replying}``: I am on the ticket (a heartbeat); answers who else is."""
    user_id = _me_or_400()
    work_ticket(db(), ticket_id)
    beat(db(), ticket_id, user_id, json_body(("activity",)).get("activity"),
         seconds=runtime().settings.presence_seconds)
    db().commit()
    return jsonify(presence(db(), ticket_id, user_id).to_dict())


@desk_api.delete("/tickets/<int:ticket_id>/presence")
def presence_leave(ticket_id: int):
    """I left the ticket's page."""
    leave(db(), ticket_id, _me_or_400())
    db().commit()
    return "", 204


@desk_api.get("/tickets/<int:ticket_id>/history")
def history(ticket_id: int):
    """The other tickets from the same customer address, newest first."""
    return jsonify({"tickets": [h.to_dict() for h in customer_history(db(), ticket_id)]})


@desk_api.post("/tickets/<int:ticket_id>/rating")
def rating(ticket_id: int):
    """``{rating: good|bad, comment?}`` from the customer (X-Ticket-Secret); a second rating replaces the first."""
    try:
        stored = rate_ticket(db(), ticket_id, json_body(RATING_FIELDS), key=request.headers.get(SECRET_HEADER))
    except RatingNotAllowed:
        raise ApiError(409, "conflict", f"ticket {ticket_id} is not solved yet: rate it once it is",
                       {"state": "must be solved"}) from None
    db().commit()
    return jsonify({"rating": stored.to_dict()})


@desk_api.get("/reports/csat")
def csat():
    """Customer satisfaction over ``days``: by agent, and AI-only vs agent-solved."""
    days = int_arg("days", 30, low=1, high=3650)
    report = csat_report(db(), days=days)
    return jsonify({"days": days, **{group: [{"label": r.label, "good": r.good, "bad": r.bad, "score": r.score}
                                             for r in rows] for group, rows in report.items()}})
