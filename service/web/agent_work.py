"""HTTP API for the agent's workspace (issue 25): the composer saved as typed, and similar solved tickets."""

from __future__ import annotations

from flask import Blueprint, g, jsonify

from service.tickets.composer import COMPOSER_FIELDS, ComposerStale, load_composer, save_composer
from service.tickets.similar import similar_solved_tickets
from service.tickets.work import work_ticket
from service.web.errors import ApiError
from service.web.requests import db, json_body, runtime

agent_work_api = Blueprint("agent_work_api", __name__, url_prefix="/api")


def _session_user_id() -> int:
    """The logged-in agent; the composer is a person's, so a token (nobody) gets a 403."""
    identity = g.get("identity")
    if identity is None or identity.kind != "session":
        raise ApiError(403, "forbidden", "the composer belongs to a logged-in agent; an API token has none")
    return identity.id


@agent_work_api.get("/tickets/<int:ticket_id>/composer")
def composer_show(ticket_id: int):
    """The caller's unsent reply text for the ticket (``body`` empty when none)."""
    user_id = _session_user_id()
    work_ticket(db(), ticket_id)
    return jsonify({"composer": load_composer(db(), ticket_id, user_id).to_dict()})


@agent_work_api.put("/tickets/<int:ticket_id>/composer")
def composer_save(ticket_id: int):
    """``{body, after_message_id?}`` → the saved text; an empty body forgets it. Sending the reply forgets it too;
    a save older than the agent's last reply is a 409 (it would bring the sent reply back)."""
    user_id = _session_user_id()
    work_ticket(db(), ticket_id)
    try:
        saved = save_composer(db(), ticket_id, user_id, json_body(COMPOSER_FIELDS))
    except ComposerStale as exc:
        raise ApiError(409, "composer_stale", str(exc)) from exc
    db().commit()
    return jsonify({"composer": saved.to_dict()})


@agent_work_api.get("/tickets/<int:ticket_id>/similar")
def similar_show(ticket_id: int):
    """Solved tickets like this one, best first, each with the agent's reply that solved it (scrubbed)."""
    rt = runtime()
    ticket = work_ticket(db(), ticket_id)
    found = similar_solved_tickets(db(), rt.embedder, ticket, limit=rt.settings.similar_tickets_limit)
    return jsonify({"tickets": [t.to_dict() for t in found]})
