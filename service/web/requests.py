"""Request helpers shared by every blueprint: the runtime, the request's session, validated arguments."""

from __future__ import annotations

import re
from typing import Any, Collection

from flask import current_app, g, request

from service.config import Settings
from service.runtime import Runtime
from service.web.errors import ApiError
from service.web.payload import parse_json_object

# C0 controls other than tab, and DEL: nothing a person types into a filter or a search box.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# ASCII digits only: str.isdigit() is true for "²" and int() takes "١٢", " 7", "1_0"; 19 digits fit a bigint.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,19}")


def runtime() -> Runtime:
    """The runtime the app was created with."""
    return current_app.extensions["supportrag"]


def db():
    """The request's session (closed, and rolled back if uncommitted, on teardown)."""
    if "db" not in g:
        g.db = runtime().sessions()
    return g.db


def json_body(allowed: Collection[str] | None = None) -> dict[str, Any]:
    """The request's JSON object with only ``allowed`` fields (when given), or a 415/413/400 in the error shape."""
    if not request.is_json:
        raise ApiError(415, "unsupported_media_type", "send a JSON body with Content-Type: application/json")
    return parse_json_object(request.get_data(cache=True), allowed=allowed)


REQUEST_OVERHEAD_BYTES = 256 * 1024  # a reply's text, JSON or multipart framing, around its files


def request_cap(settings: Settings, endpoint: str | None, default: int | None) -> int | None:
    """The largest body ``endpoint`` takes: an e-mail's INBOUND_RAW_MAX_BYTES, a reply's attachment caps (base64 in
    JSON), else ``default`` (MAX_CONTENT_LENGTH: SUPPORTRAG_MAX_REQUEST_BYTES, the JSON APIs' 1 MiB)."""
    if endpoint == "inbound.email":
        return settings.inbound_raw_max_bytes
    if endpoint in ("tickets_api.tickets_replies", "inbox.reply"):
        return max(default or 0, settings.reply_attachments_max_bytes * 4 // 3 + REQUEST_OVERHEAD_BYTES)
    return default


def apply_request_cap() -> None:
    """Before every request, first: the cap of this endpoint's body (413 above it, in the error shape)."""
    default = current_app.config.get("MAX_CONTENT_LENGTH")
    cap = request_cap(runtime().settings, request.endpoint, default)
    if cap != default:
        request.max_content_length = cap


def check_query_string() -> None:
    """Before every request: refuse NUL and control characters in query-string names and values (400)."""
    for name, value in request.args.items(multi=True):
        if _CONTROL.search(name) or _CONTROL.search(value):
            shown = _CONTROL.sub("?", name)
            raise ApiError(400, "validation_error",
                           f"query parameter {shown!r} contains a NUL or control character; remove it",
                           {shown: "must not contain NUL or control characters"})


def parse_whole_number(raw: str | None) -> int | None:
    """The one parser for numbers in query strings: ASCII digits only (at most 19), else None."""
    if raw is None or _WHOLE_NUMBER.fullmatch(raw) is None:
        return None
    return int(raw)


def body_id(value: Any) -> int | None:
    """A positive whole number from a JSON body (JSON's ``143.0`` is the whole number 143), else None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if type(value) is int and value >= 1 else None


def int_arg(name: str, default: int, *, low: int, high: int) -> int:
    """An integer query-string argument within [low, high], or a 400."""
    raw = request.args.get(name)
    if raw is None:
        return default
    value = parse_whole_number(raw.removeprefix("-"))
    if value is None:
        raise ApiError(400, "validation_error", f"{name} must be an integer", {name: "must be an integer"})
    if raw.startswith("-"):
        value = -value
    if not low <= value <= high:
        raise ApiError(400, "validation_error", f"{name} out of range", {name: f"must be between {low} and {high}"})
    return value


def page_count(total: int, per_page: int) -> int:
    """How many pages ``total`` items fill (0 for none)."""
    return -(-total // per_page)
