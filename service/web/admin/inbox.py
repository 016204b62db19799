"""The agent inbox (/admin/inbox): queues, and one ticket's workspace (thread, evidence, draft, reply, note)."""

from __future__ import annotations

import secrets

from flask import Blueprint, flash, g, redirect, render_template, request, url_for

from service.tickets.attachments import attachments_by_message
from service.tickets.canned import FilledCanned, filled_canned
from service.tickets.composer import last_reply_id, load_composer
from service.tickets.drafts import (
    DraftView,
    customer_has_last_word,
    draft_signer,
    latest_draft,
    make_draft,
    signed_by,
    stored_draft_view,
)
from service.tickets.idempotency import KEY_MAX, KeyReused, claim_key, fingerprint, record_response
from service.tickets.states import Actor
from service.tickets.similar import similar_solved_tickets
from service.tickets.thread import ticket_thread
from service.tickets.work import assign_ticket, mail_statuses, send_reply, work_item, work_ticket
from service.validation import ValidationError
from service.web.admin.ticket_list import ticket_list_page
from service.web.admin.pages import nav_context
from service.web.admin.uploads import uploaded_files
from service.web.links import article_link
from service.web.errors import ApiError
from service.web.requests import db, parse_whole_number, runtime
from service.web.tickets import learn_from_solved_ticket

inbox = Blueprint("inbox", __name__, url_prefix="/admin/inbox")
inbox.context_processor(nav_context)


def _me() -> int | None:
    identity = g.get("identity")
    return identity.id if identity is not None and identity.kind == "session" else None


@inbox.get("", endpoint="queue")
def queue():
    """The one ticket list (service/web/admin/desk.py)."""
    return ticket_list_page()


@inbox.get("/customers/<path:address>", endpoint="customer")
def customer(address: str):
    """A customer's page: every ticket from one address (any case), newest first, with the list's filters."""
    return ticket_list_page("all", customer=address)


def _draft(ticket_id: int) -> DraftView | None:
    """The latest unused AI draft, or a new one (committed: reloading the page shows the same draft); None after
    an agent's reply until the customer writes again (nothing refills the composer after a send)."""
    stored = latest_draft(db(), ticket_id)
    if stored is not None:
        view = stored_draft_view(db(), stored, article_link)
        return signed_by(view, draft_signer(db(), work_ticket(db(), ticket_id), _me()))
    if not customer_has_last_word(db(), ticket_id):
        return None
    # The one GET that writes (the API's GET never does): the composer is drawn here and must hold the draft without
    # script, and it writes once per state of the thread (docs/agents-workspace.md#reading-a-draft-never-writes).
    draft = make_draft(db(), runtime(), runtime().chat, ticket_id, link=article_link, user_id=_me())
    db().commit()
    return draft


def _canned_choice() -> int | None:
    """``?canned=`` (the no-script fallback of "Use"), through the one number parser: anything else is a 400."""
    raw = request.args.get("canned")
    if raw is None:
        return None
    canned_id = parse_whole_number(raw)
    if canned_id is None:
        raise ApiError(400, "validation_error", "canned must be a canned reply's number", {"canned": "must be an integer"})
    return canned_id


def _composer(ticket_id: int, item, replies: list[FilledCanned]) -> tuple[str, DraftView | None, str | None, bool]:
    """(composer text, the AI draft, the canned reply's title, restored?): the agent's unsent text when it is
    newer than the draft, else a canned reply if asked, else the AI draft."""
    draft, canned_id = _draft(ticket_id), _canned_choice()
    chosen = next((c for c in replies if c.id == canned_id), None)
    if chosen is not None:
        return chosen.body, draft, chosen.title, False
    saved = load_composer(db(), ticket_id, _me()) if _me() is not None else None
    stored = latest_draft(db(), ticket_id)
    if saved and saved.body and (stored is None or saved.updated_at >= stored.created_at):
        return saved.body, draft, None, True
    return (draft.draft if draft else ""), draft, None, False


@inbox.get("/<int:ticket_id>", endpoint="ticket")
def ticket(ticket_id: int):
    """The workspace: the thread, the evidence (sections and similar solved tickets), and the composer holding
    the agent's unsent text, else the AI draft."""
    item = work_item(db(), ticket_id)
    replies = filled_canned(db(), ticket_id, agent_id=_me())
    text, draft, canned_title, restored = _composer(ticket_id, item, replies)
    similar = similar_solved_tickets(db(), runtime().embedder, work_ticket(db(), ticket_id),
                                     limit=runtime().settings.similar_tickets_limit)
    return render_template("admin/inbox_ticket.html", item=item, t=item.ticket, thread=ticket_thread(db(), ticket_id),
                           mail=mail_statuses(db(), ticket_id), composer=text, draft=draft, canned_title=canned_title,
                           canned=replies, has_llm=runtime().chat is not None, me=_me(), restored=restored,
                           similar=similar, min_similar=runtime().settings.similar_ticket_min_similarity,
                           files=attachments_by_message(db(), ticket_id),
                           floor=runtime().settings.answer_min_similarity,
                           idempotency_key=secrets.token_urlsafe(16), last_reply_id=last_reply_id(db(), ticket_id, _me()))


@inbox.post("/<int:ticket_id>/assign", endpoint="assign")
def assign(ticket_id: int):
    """Assign to me (or ``unassign=1``)."""
    assign_ticket(db(), ticket_id, None if request.form.get("unassign") else _me())
    db().commit()
    return redirect(url_for("inbox.ticket", ticket_id=ticket_id))


@inbox.post("/<int:ticket_id>/draft", endpoint="regenerate")
def regenerate(ticket_id: int):
    """A new draft following the agent's instruction (with a language model)."""
    work_item(db(), ticket_id)
    try:
        make_draft(db(), runtime(), runtime().chat, ticket_id, link=article_link, user_id=_me(),
                   instruction=request.form.get("instruction", "").strip() or None)
    except ValidationError as exc:
        flash(f"No new draft: {exc.message}.", "error")
        return redirect(url_for("inbox.ticket", ticket_id=ticket_id))
    db().commit()
    flash("New draft ready.", "success")
    return redirect(url_for("inbox.ticket", ticket_id=ticket_id, _anchor="composer"))


@inbox.post("/<int:ticket_id>/reply", endpoint="reply")
def reply(ticket_id: int):
    """Send the reply (or save the internal note) and set the state, in one action."""
    internal = request.form.get("internal") == "1"
    fields = {"body": request.form.get("body", ""), "internal": internal}
    if request.form.get("status"):
        fields["status"] = request.form["status"]
    key = request.form.get("idempotency_key", "").strip()[:KEY_MAX] or None  # the form's own: a double submit
    if key is not None:
        work_ticket(db(), ticket_id)
        try:
            earlier = claim_key(db(), ticket_id, key, fingerprint(fields))
        except KeyReused:
            earlier = True
        if earlier is not None:
            db().rollback()
            flash("Already sent: this form was submitted before.", "success")
            return redirect(url_for("inbox.ticket", ticket_id=ticket_id))
    try:
        sent = send_reply(db(), runtime().settings, ticket_id, fields, agent=Actor("agent", _me()),
                          files=uploaded_files(request.files.getlist("attachments")))
    except ValidationError as exc:
        db().rollback()
        flash(f"Not sent: {'; '.join(f'{k} {v}' for k, v in exc.details.items())}.", "error")
        return redirect(url_for("inbox.ticket", ticket_id=ticket_id))
    if key is not None:
        record_response(db(), ticket_id, key, 303, {"state": sent.state})
    db().commit()
    if sent.state == "solved":
        learn_from_solved_ticket(ticket_id)
    if internal:
        flash("Internal note saved.", "success")
    else:
        mail = " E-mail queued." if sent.email == "queued" else ""
        flash(f"Reply sent; the ticket is {sent.state}.{mail}", "success")
    return redirect(url_for("inbox.ticket", ticket_id=ticket_id))
