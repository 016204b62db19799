"""Downloading a thread message's attachment: agents through the API, the ticket's customer with its secret.

Always a download (``Content-Disposition: attachment``, ``application/octet-stream``, ``nosniff``, a sandbox CSP):
nothing a sender attached is ever rendered by the browser in our origin.
"""

from __future__ import annotations

import io

from flask import Blueprint, Response, request, send_file, url_for

from service.tickets.attachments import AttachmentView, attachment_content
from service.tickets.helpdesk import customer_ticket
from service.tickets.work import work_ticket
from service.web.errors import ApiError
from service.web.requests import db

attachments = Blueprint("attachments", __name__)
SECRET_HEADER = "X-Ticket-Secret"


def attachment_url(ticket_id: int, attachment: AttachmentView) -> str:
    """Where an agent downloads it."""
    return url_for("attachments.agent_download", ticket_id=ticket_id, attachment_id=attachment.id)


def customer_attachment_url(ticket_id: int, attachment: AttachmentView) -> str:
    """Where the ticket's customer downloads it (the ticket's cookie, or X-Ticket-Secret)."""
    return url_for("attachments.customer_download", ticket_id=ticket_id, attachment_id=attachment.id)


def _download(ticket_id: int, attachment_id: int, *, public_only: bool) -> Response:
    try:
        view, content = attachment_content(db(), ticket_id, attachment_id, public_only=public_only)
    except LookupError as exc:
        raise ApiError(404, "attachment_not_found", f"no attachment {attachment_id} on ticket {ticket_id}") from exc
    response = send_file(io.BytesIO(content), mimetype="application/octet-stream", as_attachment=True,
                         download_name=view.filename, max_age=0, etag=view.sha256)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response.headers["Cache-Control"] = "private, no-store"
    return response


@attachments.get("/api/tickets/<int:ticket_id>/attachments/<int:attachment_id>")
def agent_download(ticket_id: int, attachment_id: int):
    """An attachment of any message of the ticket, for agents (internal notes included)."""
    work_ticket(db(), ticket_id)
    return _download(ticket_id, attachment_id, public_only=False)


@attachments.get("/help/tickets/<int:ticket_id>/attachments/<int:attachment_id>")
def customer_download(ticket_id: int, attachment_id: int):
    """An attachment on the customer's own thread: the ticket's cookie or X-Ticket-Secret proves it (else 404)."""
    key = request.headers.get(SECRET_HEADER) or request.cookies.get(f"ticket_{ticket_id}", "")
    customer_ticket(db(), ticket_id, key)
    return _download(ticket_id, attachment_id, public_only=True)
