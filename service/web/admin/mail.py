"""/admin/mail: what the e-mail channel could not do by itself — quarantined inbound mail (retry, discard) and
outgoing mail given up on (retry). Agents may look; only admins act."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for

from service.intake.imap_status import poll_problems
from service.intake.receive import handle_stored
from service.intake.store import automatic_inbound, discard_inbound, inbound_counts, open_inbound, reopen_inbound
from service.mail.outbox import NotFailed, failed_mail, retry_failed_mail, retrying_mail
from service.web.admin.pages import nav_context
from service.web.errors import ApiError
from service.web.links import ticket_link
from service.web.requests import db, runtime

admin_mail = Blueprint("admin_mail", __name__, url_prefix="/admin/mail")
admin_mail.context_processor(nav_context)


@admin_mail.get("", endpoint="index")
def index():
    """The IMAP poller's failing folders, the quarantine, inbound mail stored but not handled, and failed
    outgoing mail."""
    return render_template("admin/mail.html", inbound=open_inbound(db()), counts=inbound_counts(db()),
                           failed=failed_mail(db()), retrying=retrying_mail(db()), automatic=automatic_inbound(db()),
                           imap_problems=poll_problems(db()))


def _not_found(what: str, exc: LookupError) -> ApiError:
    return ApiError(404, "not_found", f"{what}: {exc}")


@admin_mail.post("/inbound/<int:inbound_id>/retry", endpoint="retry_inbound")
def retry_inbound(inbound_id: int):
    """Handle a quarantined e-mail again (after a fix, or a setting changed): a ticket, or back in quarantine."""
    try:
        reopen_inbound(db(), inbound_id)
    except LookupError as exc:
        raise _not_found("inbound e-mail", exc) from exc
    db().commit()
    outcome = handle_stored(runtime(), inbound_id, ticket_link=ticket_link)
    shown = f"T-{outcome.ticket_id}" if outcome.ticket_id else outcome.reason
    flash(f"E-mail #{inbound_id}: {outcome.action.replace('_', ' ')} ({shown}).",
          "error" if outcome.action == "quarantined" else "success")
    return redirect(url_for("admin_mail.index"))


@admin_mail.post("/inbound/<int:inbound_id>/discard", endpoint="discard_inbound")
def discard(inbound_id: int):
    """Drop a quarantined e-mail (its row stays, marked discarded)."""
    try:
        discard_inbound(db(), inbound_id)
    except LookupError as exc:
        raise _not_found("inbound e-mail", exc) from exc
    db().commit()
    flash(f"E-mail #{inbound_id} discarded.", "success")
    return redirect(url_for("admin_mail.index"))


@admin_mail.post("/outbox/<int:outbox_id>/retry", endpoint="retry_outbox")
def retry_outbox(outbox_id: int):
    """Queue a failed outgoing e-mail again."""
    try:
        retry_failed_mail(db(), outbox_id)
    except LookupError as exc:
        raise _not_found("outgoing e-mail", exc) from exc
    except NotFailed as exc:  # sent meanwhile, or already queued again by someone else
        flash(str(exc), "error")
        return redirect(url_for("admin_mail.index"))
    db().commit()
    flash(f"Outgoing e-mail #{outbox_id} queued again.", "success")
    return redirect(url_for("admin_mail.index"))
