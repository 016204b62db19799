"""The inbound webhook's signature, as Stripe and Mailgun sign theirs: ``X-Signature: t=<unix>,v1=<hex>`` where
the hex is HMAC-SHA256 of ``"<t>." + body`` under INBOUND_EMAIL_SECRET. The timestamp bounds a replay to the
tolerance window, inside which the content-hash dedupe (service.intake.store) catches it."""

from __future__ import annotations

import hashlib
import hmac

TOLERANCE_SECONDS = 300
MAX_SIGNATURES = 5  # v1 values accepted in one header (several while a secret is being rotated)


class SignatureError(ValueError):
    """Why a signature was refused."""


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Signature`` header value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def parse_signature(header: str) -> tuple[int, list[str]]:
    """``(t, [v1, …])`` from the header; SignatureError if it is not in that form."""
    timestamp, signatures = None, []
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t" and value.isascii() and value.isdigit() and len(value) <= 12:
            timestamp = int(value)
        elif key == "v1":
            signatures.append(value.strip().lower())
    if timestamp is None or not signatures or len(signatures) > MAX_SIGNATURES:
        raise SignatureError("X-Signature must be t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.\" + body>")
    return timestamp, signatures


def verify_signature(secret: str, body: bytes, header: str, *, now: float,
                     tolerance: int = TOLERANCE_SECONDS) -> None:
    """Return if ``header`` signs ``body`` within ``tolerance`` seconds of ``now``; else SignatureError."""
    timestamp, signatures = parse_signature(header)
    if abs(now - timestamp) > tolerance:
        raise SignatureError(f"the signature's timestamp is more than {tolerance} s away from the server's clock")
    expected = sign(secret, body, timestamp).partition(",v1=")[2].encode()
    if not any(hmac.compare_digest(expected, candidate.encode()) for candidate in signatures):
        raise SignatureError("v1 is not the HMAC-SHA256 of \"<t>.\" + body under INBOUND_EMAIL_SECRET")
