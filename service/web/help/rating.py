""""How did we do?": the customer rates a solved ticket from its page (the secret in the cookie) or from the solve
e-mail's link (the ticket's reply token). Forms work without JavaScript."""

from __future__ import annotations

from flask import Blueprint, redirect, render_template, request, url_for

from service.db.models import Ticket
from service.links import verify_ticket_link
from service.tickets.queries import TicketNotFound
from service.tickets.ratings import RatingNotAllowed, rate_ticket
from service.validation import ValidationError
from service.web.help.pages import _not_found_page, _security_headers, _ticket_key
from service.web.requests import db, runtime

help_rating = Blueprint("help_rating", __name__, url_prefix="/help")
help_rating.after_request(_security_headers)
help_rating.register_error_handler(TicketNotFound, _not_found_page)


def _signed_link_token(ticket_id: int) -> str | None:
    """The ticket's reply token when the form came from a page a valid signed link opened (no secret there)."""
    if not verify_ticket_link(runtime().settings, ticket_id, request.form.get("link"), purpose="view"):
        return None
    ticket = db().get(Ticket, ticket_id)
    return ticket.reply_token if ticket is not None else None


@help_rating.get("/tickets/<int:ticket_id>/rate", endpoint="rate_page")
def rate_page(ticket_id: int):
    """The solve e-mail's link: good or bad, and a comment (nothing is stored until the form is sent)."""
    return render_template("help/rate.html", ticket_id=ticket_id, token=request.args.get("token", ""),
                           key="", done=False, error=None)


@help_rating.post("/tickets/<int:ticket_id>/rate", endpoint="rate")
def rate(ticket_id: int):
    """Store the rating (a second one replaces the first); back to the ticket page, or a thank-you."""
    token = request.form.get("token") or _signed_link_token(ticket_id)
    key = None if token else _ticket_key(ticket_id)
    fields = {"rating": request.form.get("rating")}
    if request.form.get("comment", "").strip():
        fields["comment"] = request.form["comment"]
    try:
        rate_ticket(db(), ticket_id, fields, key=key, token=token)
    except (ValidationError, RatingNotAllowed) as exc:
        db().rollback()
        error = "Please choose good or bad (and keep the comment under 2,000 characters)." \
            if isinstance(exc, ValidationError) else "This ticket is not solved yet."
        return render_template("help/rate.html", ticket_id=ticket_id, token=token or "", key=key or "",
                               done=False, error=error), 400 if isinstance(exc, ValidationError) else 409
    db().commit()
    if request.form.get("link"):  # rated from the page a signed link opened: back to it
        return redirect(url_for("help.ticket", ticket_id=ticket_id, link=request.form["link"], _anchor="rating"), 303)
    if token:
        return render_template("help/rate.html", ticket_id=ticket_id, token="", key="", done=True, error=None)
    return redirect(url_for("help.ticket", ticket_id=ticket_id, _anchor="rating"), 303)
