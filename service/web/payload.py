"""Strict JSON bodies: UTF-8 only, bounded nesting, no NaN/Infinity, no lone surrogates or NUL, no unknown fields.

Everything here is pure (bytes in, dict or ApiError out) so it is tested without a server. Checking the
whole document once, here, keeps bad input from ever reaching an embedder or the database, where it
used to surface as a provider outage or a psycopg error (a 500).
"""

from __future__ import annotations

import json
import math
from typing import Any, Collection

from service.web.errors import ApiError

MAX_DEPTH = 32


def _constant_as_nan(name: str) -> float:
    """``NaN``/``Infinity`` are not JSON; read them as NaN so the field check refuses them by field name.

    (Numbers too large for a float, ``1e400``, are read as infinity and refused the same way.)
    """
    return math.nan


def _problem_with_string(value: str) -> str | None:
    """Why a string cannot be stored or searched, or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (e.g. \\ud800); send valid Unicode text"
    return None


def find_problems(value: Any, path: str, problems: dict[str, str], depth: int = 0) -> None:
    """Record in ``problems`` (path → message) every string, key or number that is not acceptable."""
    if depth > MAX_DEPTH:
        problems[path or "body"] = f"nested more than {MAX_DEPTH} levels deep"
        return
    if isinstance(value, str):
        problem = _problem_with_string(value)
        if problem:
            problems[path or "body"] = problem
    elif isinstance(value, float) and not math.isfinite(value):
        problems[path or "body"] = "must be a finite number (NaN and Infinity are not JSON)"
    elif isinstance(value, dict):
        for key, item in value.items():
            key_problem = _problem_with_string(key)
            if key_problem:
                problems[(f"{path}." if path else "") + key.encode("utf-8", "backslashreplace").decode()] = (
                    "field name " + key_problem)
                continue
            find_problems(item, f"{path}.{key}" if path else key, problems, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            find_problems(item, f"{path}[{index}]", problems, depth + 1)


def parse_json_object(raw: bytes, *, allowed: Collection[str] | None = None) -> dict[str, Any]:
    """The body as a JSON object, or an ApiError naming what is wrong (and, for fields, which)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_encoding", f"the request body is not valid UTF-8 (byte {exc.start})",
                       {"body": "must be UTF-8 encoded JSON"})
    try:
        body = json.loads(text, parse_constant=_constant_as_nan)
    except RecursionError:
        raise ApiError(400, "invalid_json", f"the JSON is nested too deeply (at most {MAX_DEPTH} levels)")
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the request body is not valid JSON: {exc}")
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "the request body must be a JSON object")
    problems: dict[str, str] = {}
    unknown = sorted(key for key in body if allowed is not None and key not in allowed)
    for key in unknown:
        problems[key.encode("utf-8", "backslashreplace").decode()] = "unknown field"
    find_problems({k: v for k, v in body.items() if k not in unknown}, "", problems)
    if unknown:
        names = ", ".join(repr(key) for key in problems if problems[key] == "unknown field")
        raise ApiError(400, "validation_error",
                       f"unknown field(s) {names}; allowed: {', '.join(sorted(allowed or ()))}", problems)
    if problems:
        raise ApiError(400, "validation_error", "invalid input: " + "; ".join(
            f"{path} {message}" for path, message in problems.items()), problems)
    return body
