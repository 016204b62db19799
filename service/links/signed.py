"""The one ticket link builder: an absolute URL from SUPPORTRAG_PUBLIC_URL (never a request's Host) with an
expiring token signed by a server secret, per ticket and purpose, that opens the ticket on any device.

The token is ``<expiry, base 36>.<HMAC-SHA256, url-safe base 64>`` over ``ticket:purpose:expiry``. The secret is
SUPPORTRAG_SECRET_KEY when set, else a random key kept in ``<data dir>/link-secret`` (created once, mode 0600),
so the web workers, the CLI and the IMAP poller of one installation sign alike without a database round trip.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import quote

from service.config import Settings

LINK_PARAMETER = "link"  # the query parameter (and form field) that carries the token
LINK_LIFETIME_SECONDS = 180 * 24 * 3600  # a customer may come back to an old e-mail months later
SECRET_FILE = "link-secret"
_secrets: dict[Path, bytes] = {}
_secrets_lock = threading.Lock()


def base_url(settings: Settings) -> str:
    """Where customers reach this service: SUPPORTRAG_PUBLIC_URL, else the configured host and port."""
    return (settings.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")


def _stored_secret(path: Path) -> bytes:
    """The key in ``path``, made on first use; O_EXCL so two processes starting together keep the same one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # another process is writing it right now
            value = path.read_bytes().strip()
            if value:
                return value
            time.sleep(0.01)
        raise RuntimeError(f"{path} is empty: delete it to make a new link secret")
    value = secrets.token_hex(32).encode()
    with os.fdopen(fd, "wb") as handle:
        handle.write(value)
    return value


def _secret(settings: Settings) -> bytes:
    if settings.secret_key:
        return settings.secret_key.encode()
    path = settings.data_dir / SECRET_FILE
    with _secrets_lock:
        if path not in _secrets:
            _secrets[path] = _stored_secret(path)
        return _secrets[path]


def _signature(settings: Settings, ticket_id: int, purpose: str, expires: int) -> str:
    message = f"{ticket_id}:{purpose}:{expires}".encode()
    digest = hmac.new(_secret(settings), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign_ticket(settings: Settings, ticket_id: int, *, purpose: str = "view", now: float | None = None) -> str:
    """A token that opens ``ticket_id`` for ``purpose`` until LINK_LIFETIME_SECONDS from now."""
    expires = int(time.time() if now is None else now) + LINK_LIFETIME_SECONDS
    return f"{_base36(expires)}.{_signature(settings, ticket_id, purpose, expires)}"


def verify_ticket_link(settings: Settings, ticket_id: int, token: str | None, *, purpose: str = "view",
                       now: float | None = None) -> bool:
    """Whether ``token`` was signed here for this ticket and purpose, and has not expired."""
    if not token or len(token) > 128 or token.count(".") != 1:
        return False
    stamp, signature = token.split(".")
    try:
        expires = int(stamp, 36)
    except ValueError:
        return False
    if expires < (time.time() if now is None else now):
        return False
    return hmac.compare_digest(signature, _signature(settings, ticket_id, purpose, expires))


def ticket_link(settings: Settings, ticket_id: int, *, purpose: str = "view") -> str:
    """The customer's ticket page as an absolute URL with a signed, expiring token."""
    token = sign_ticket(settings, ticket_id, purpose=purpose)
    return f"{base_url(settings)}/help/tickets/{ticket_id}?{LINK_PARAMETER}={quote(token)}"


def rating_link(settings: Settings, ticket_id: int, token: str) -> str:
    """The rating page (absolute), with the ticket's reply token."""
    return f"{base_url(settings)}/help/tickets/{ticket_id}/rate?token={quote(token)}"


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
    return out or "0"
