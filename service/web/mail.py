"""Failed outgoing e-mail where agents look: the retry API, the workspace's retry button, the dashboard count.

The templates call ``failed_mail_for(ticket_id)`` and ``failed_mail_count()`` (an app-wide context processor),
so the pages that show them need no change to their views: a partial and one include line each.
"""

from __future__ import annotations

from flask import Blueprint, Flask, flash, jsonify, redirect, url_for

from service.mail.outbox import NotFailed, OutboxNotFound, count_failed_mail, failed_mail, mail_state, retry_failed_mail
from service.web.errors import ApiError
from service.web.requests import db

mail_api = Blueprint("mail_api", __name__, url_prefix="/api/mail")
inbox_mail = Blueprint("inbox_mail", __name__, url_prefix="/admin/inbox")


def _retry(outbox_id: int) -> None:
    """Retry in the request's transaction and commit; 404 unknown, 409 not failed."""
    try:
        retry_failed_mail(db(), outbox_id)
    except OutboxNotFound:
        raise ApiError(404, "not_found", f"no e-mail {outbox_id} in the outbox") from None
    except NotFailed as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    db().commit()


@mail_api.post("/outbox/<int:outbox_id>/retry", endpoint="retry")
def retry(outbox_id: int):
    """A failed e-mail goes back to the queue from its first attempt: 200 ``{mail}``."""
    _retry(outbox_id)
    return jsonify({"mail": mail_state(db(), outbox_id).to_dict()})


@inbox_mail.post("/<int:ticket_id>/mail/<int:outbox_id>/retry", endpoint="retry")
def retry_from_workspace(ticket_id: int, outbox_id: int):
    """The workspace's "Retry" button: back to the ticket with a message."""
    try:
        _retry(outbox_id)
    except ApiError as exc:
        db().rollback()
        flash(f"Not retried: {exc.message}.", "error")
    else:
        flash("E-mail queued again.", "success")
    return redirect(url_for("inbox.ticket", ticket_id=ticket_id))


def init_mail_views(app: Flask) -> None:
    """Register the blueprints and the helpers the templates call."""
    app.register_blueprint(mail_api)
    app.register_blueprint(inbox_mail)

    @app.context_processor
    def _failed_mail_helpers() -> dict:
        return {"failed_mail_for": lambda ticket_id: failed_mail(db(), ticket_id=ticket_id),
                "failed_mail_count": lambda: count_failed_mail(db())}
