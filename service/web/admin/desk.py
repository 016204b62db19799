"""Bulk actions and tags from the pages, the workspace's team panel (presence, tags,
customer history), the agent's own settings (/admin/settings) and the team list (/admin/agents)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, abort, flash, g, redirect, render_template, request, url_for

from service.accounts import user_id_for
from service.db.models import Ticket
from service.tickets.desk import QUEUES, bulk_update, customer_history
from service.tickets.presence import beat, mark_read, presence, unread_count
from service.tickets.ratings import csat_report
from service.tickets.solving import solve_tickets
from service.tickets.states import Actor
from service.tickets.tags import parse_tag_text, set_tags, ticket_tags
from service.tickets.team import get_profile, list_profiles, update_profile
from service.validation import ValidationError
from service.web.admin.pages import nav_context
from service.web.desk import LIST_ARGUMENTS, my_user_id
from service.web.help.rating import help_rating
from service.web.requests import db, parse_whole_number, runtime

desk = Blueprint("desk", __name__, url_prefix="/admin")
desk.context_processor(nav_context)


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{k} {v}" for k, v in exc.details.items()) or exc.message


@desk.post("/desk/<int:ticket_id>/tags", endpoint="tags")
def tags(ticket_id: int):
    """Save the ticket's tags (typed with commas or spaces)."""
    try:
        stored = set_tags(db(), ticket_id, parse_tag_text(request.form.get("tags", "")))
    except ValidationError as exc:
        db().rollback()
        flash(f"Tags not saved: {_errors(exc)}.", "error")
    else:
        db().commit()
        flash(f"Tags: {', '.join(stored) or 'none'}.", "success")
    return redirect(url_for("inbox.ticket", ticket_id=ticket_id))


@desk.post("/desk/bulk", endpoint="bulk")
def bulk():
    """Assign the ticked tickets (to me, to someone, or to nobody) or solve them."""
    ids = [parse_whole_number(raw) for raw in request.form.getlist("ids")]
    action, assignee = request.form.get("action"), request.form.get("assignee", "me")
    try:
        assignee_id = my_user_id() if assignee == "me" else None if assignee == "none" else user_id_for(db(), assignee)
        changed = bulk_update(db(), [i for i in ids if i is not None], action,
                              agent=Actor("agent", my_user_id()), assignee_id=assignee_id)
    except ValidationError as exc:
        db().rollback()
        flash(f"Nothing changed: {_errors(exc)}.", "error")
    else:
        db().commit()
        if action == "solve":
            solve_tickets(runtime(), changed)
        flash(f"{len(changed)} ticket{'s' if len(changed) != 1 else ''} {'solved' if action == 'solve' else 'assigned'}.",
              "success")
    return redirect(request.form.get("back") if (request.form.get("back") or "").startswith("/admin/inbox")
                    else url_for("inbox.queue"))


def _profile_target() -> str:
    """Whose settings: my own; an admin may name anyone with ``?username=``."""
    mine = g.identity.name
    wanted = request.values.get("username") or mine
    if wanted != mine and g.identity.role != "admin":
        abort(403)
    return wanted


@desk.route("/settings", methods=["GET", "POST"], endpoint="settings")
def settings():
    """The display name customers see, the e-mail notifications go to, and the notification switch."""
    if g.identity.kind != "session":
        abort(403)
    username, errors = _profile_target(), {}
    if request.method == "POST":
        fields = {"display_name": request.form.get("display_name", ""), "email": request.form.get("email", ""),
                  "notify_by_email": request.form.get("notify_by_email") == "1"}
        try:
            update_profile(db(), username, fields)
        except ValidationError as exc:
            db().rollback()
            errors = exc.details
            flash(f"Not saved: {_errors(exc)}.", "error")
        else:
            db().commit()
            flash("Settings saved.", "success")
            return redirect(url_for("desk.settings", username=username if username != g.identity.name else None))
    return render_template("admin/settings.html", profile=get_profile(db(), username), errors=errors), \
        400 if errors else 200


@desk.get("/agents", endpoint="agents")
def agents():
    """Every account with its display name, e-mail and notification switch (admins edit them from here)."""
    return render_template("admin/agents.html", profiles=list_profiles(db()))


def record_workspace_view() -> None:
    """Before the workspace renders: the agent has read the ticket now, and is viewing it (presence)."""
    if request.endpoint != "inbox.ticket" or request.method != "GET":
        return
    user_id, ticket_id = my_user_id(), (request.view_args or {}).get("ticket_id")
    if user_id is None or not isinstance(ticket_id, int) or not 1 <= ticket_id < 2**63:
        return
    if db().get(Ticket, ticket_id) is None:
        return
    mark_read(db(), ticket_id, user_id)
    beat(db(), ticket_id, user_id, "viewing", seconds=runtime().settings.presence_seconds)
    db().commit()


def desk_panel(ticket_id: int) -> dict[str, Any]:
    """What the workspace's team panel shows: who else is here, the tags, the customer's other tickets."""
    return {"presence": presence(db(), ticket_id, my_user_id()), "tags": ticket_tags(db(), [ticket_id])[ticket_id],
            "history": customer_history(db(), ticket_id), "poll_seconds": max(2, runtime().settings.presence_seconds // 4)}


def unread_tickets() -> int:
    """The navigation's count: my open or pending tickets with a customer message I have not seen."""
    user_id = my_user_id()
    return unread_count(db(), user_id) if user_id is not None else 0


def register_desk(app: Flask) -> None:
    """Blueprints, the workspace hook, and the template helpers the shared templates call."""
    app.register_blueprint(desk)
    app.register_blueprint(help_rating)
    app.before_request(record_workspace_view)
    app.add_template_global(desk_panel)
    app.add_template_global(unread_tickets)
    app.add_template_global(lambda days: csat_report(db(), days=days), "csat_panel")
    app.add_template_global(QUEUES, "desk_queues")
    app.add_template_global(LIST_ARGUMENTS, "desk_list_arguments")
