"""Customer data on request under /api/customers: export (a ZIP) and erase (admins only)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from service.privacy.erase import InvalidEmail, erase_customer, normalise_email
from service.privacy.export import export_customer
from service.privacy.report import privacy_counts
from service.web.errors import ApiError
from service.web.learning import actor
from service.web.requests import db, json_body

privacy_api = Blueprint("privacy_api", __name__, url_prefix="/api/customers")
ERASE_FIELDS = ("email", "confirm", "dry_run")


@privacy_api.app_context_processor
def _privacy_helpers() -> dict:
    """``privacy_counts()`` for the dashboard's line on erasure and retention."""
    return {"privacy_counts": lambda: privacy_counts(db())}


def _email(value: object, field: str = "email") -> str:
    """The address, or a 400 naming the field."""
    try:
        return normalise_email(value)
    except InvalidEmail as exc:
        raise ApiError(400, "validation_error", "invalid e-mail address", {field: str(exc)}) from None


@privacy_api.get("/export")
def customer_export():
    """``?email=`` → a ZIP of everything stored about that customer."""
    email = _email(request.args.get("email"))
    export = export_customer(db(), email)
    response = Response(export.data, mimetype="application/zip")
    response.headers["Content-Disposition"] = 'attachment; filename="customer-export.zip"'
    response.headers["Cache-Control"] = "no-store"
    return response


@privacy_api.post("/erase")
def customer_erase():
    """``{email, confirm, dry_run}`` (the address typed twice) → the counts removed, in one transaction."""
    body = json_body(ERASE_FIELDS)
    email, confirm = _email(body.get("email")), _email(body.get("confirm"), "confirm")
    if email != confirm:
        raise ApiError(400, "validation_error", "the confirmation does not match the address",
                       {"confirm": "type the same address twice"})
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ApiError(400, "validation_error", "invalid erase request", {"dry_run": "must be true or false"})
    report = erase_customer(db(), email, actor=actor(), dry_run=dry_run)
    db().commit()
    return jsonify(report.to_dict())
