"""``POST /api/inbound/email``: raw MIME from a mail provider's webhook, signed with INBOUND_EMAIL_SECRET."""

from __future__ import annotations

import time

from flask import Blueprint, jsonify, request

from service.intake.receive import receive_email
from service.intake.signature import SignatureError, verify_signature
from service.web.errors import ApiError
from service.web.links import ticket_link
from service.web.requests import runtime

inbound = Blueprint("inbound", __name__, url_prefix="/api/inbound")
SIGNATURE_HEADER = "X-Signature"


def check_signature(body: bytes) -> None:
    """401 unless X-Signature signs the body recently under INBOUND_EMAIL_SECRET (404 while none is set)."""
    secret = runtime().settings.inbound_email_secret
    if not secret:
        raise ApiError(404, "inbound_email_disabled", "inbound e-mail is off: set INBOUND_EMAIL_SECRET to accept it")
    try:
        verify_signature(secret, body, request.headers.get(SIGNATURE_HEADER, ""), now=time.time())
    except SignatureError as exc:
        raise ApiError(401, "invalid_signature", str(exc), {SIGNATURE_HEADER: "missing, wrong or too old"}) from exc


@inbound.post("/email", endpoint="email")
def email_webhook():
    """Raw RFC 5322 bytes → stored, then a follow-up, a new ticket, a duplicate, ignored or quarantined: 200.

    503 when the database is down (nothing was kept: the provider should retry).
    """
    body = request.get_data(cache=False)  # capped at INBOUND_RAW_MAX_BYTES (service.web.requests.request_cap)
    check_signature(body)
    outcome = receive_email(runtime(), body, ticket_link=ticket_link)
    return jsonify({"outcome": outcome.to_dict()})
