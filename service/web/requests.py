"""Request helpers shared by every blueprint: the runtime, the request's session, validated arguments."""

from __future__ import annotations

from typing import Any

from flask import current_app, g, request

from service.runtime import Runtime
from service.web.errors import ApiError


def runtime() -> Runtime:
    """The runtime the app was created with."""
    return current_app.extensions["supportrag"]


def db():
    """The request's session (closed, and rolled back if uncommitted, on teardown)."""
    if "db" not in g:
        g.db = runtime().sessions()
    return g.db


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 415/400 in the error shape."""
    if not request.is_json:
        raise ApiError(415, "unsupported_media_type", "send a JSON body with Content-Type: application/json")
    body = request.get_json(silent=True)
    if body is None:
        raise ApiError(400, "invalid_json", "the request body is not valid JSON")
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "the request body must be a JSON object")
    return body


def int_arg(name: str, default: int, *, low: int, high: int) -> int:
    """An integer query-string argument within [low, high], or a 400."""
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "validation_error", f"{name} must be an integer", {name: "must be an integer"})
    if not low <= value <= high:
        raise ApiError(400, "validation_error", f"{name} out of range", {name: f"must be between {low} and {high}"})
    return value


def page_count(total: int, per_page: int) -> int:
    """How many pages ``total`` items fill (0 for none)."""
    return -(-total // per_page)
