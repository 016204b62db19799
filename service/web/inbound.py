"""``POST /api/inbound/email``: raw MIME from a mail provider's webhook, signed with INBOUND_EMAIL_SECRET."""

from __future__ import annotations

import hashlib
import hmac

from flask import Blueprint, jsonify, request

from service.mail.inbound import receive_email
from service.web.errors import ApiError
from service.web.links import ticket_link
from service.web.requests import runtime

inbound = Blueprint("inbound", __name__, url_prefix="/api/inbound")
SIGNATURE_HEADER = "X-Signature"


def signature(secret: str, body: bytes) -> str:
    """Hex HMAC-SHA256 of the raw body: what the sender puts in X-Signature."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def check_signature(body: bytes) -> None:
    """401 unless X-Signature is the body's HMAC under INBOUND_EMAIL_SECRET (404 while none is set: it is off)."""
    secret = runtime().settings.inbound_email_secret
    if not secret:
        raise ApiError(404, "inbound_email_disabled", "inbound e-mail is off: set INBOUND_EMAIL_SECRET to accept it")
    sent = request.headers.get(SIGNATURE_HEADER, "").strip().lower()
    if not hmac.compare_digest(signature(secret, body).encode(), sent.encode()):
        raise ApiError(401, "invalid_signature", "X-Signature is not the HMAC-SHA256 of the body",
                       {SIGNATURE_HEADER: "missing or wrong"})


@inbound.post("/email", endpoint="email")
def email_webhook():
    """Raw RFC 5322 bytes → a follow-up, a new ticket, or nothing (duplicate, auto-reply); 200 with the outcome."""
    body = request.get_data(cache=False)  # over SUPPORTRAG_MAX_REQUEST_BYTES: 413 before we get here
    check_signature(body)
    outcome = receive_email(runtime(), body, ticket_link=ticket_link)
    return jsonify({"outcome": outcome.to_dict()})
