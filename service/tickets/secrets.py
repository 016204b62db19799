"""Per-ticket secrets: the customer who submitted a ticket proves it with the secret returned at submission.

Only the SHA-256 is stored (like API tokens), so a database reader cannot act as the customer.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_BYTES = 24


def new_ticket_secret() -> tuple[str, str]:
    """A fresh URL-safe secret and the SHA-256 hex digest to store."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    return secret, secret_sha256(secret)


def secret_sha256(secret: str) -> str:
    """Hex SHA-256 of a secret."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def secret_matches(stored_sha256: str | None, given: str | None) -> bool:
    """Whether ``given`` is the ticket's secret (constant-time; tickets without a secret match nothing)."""
    if not stored_sha256 or not given:
        return False
    return hmac.compare_digest(stored_sha256, secret_sha256(given))
