"""Input checks shared by the Python API, the HTTP API and the CLI."""

from __future__ import annotations

import math
from typing import Any

from service.db.models import CATEGORY_MAX, CONTENT_MAX, IMPORTANCE_DECIMALS, IMPORTANCE_MAX, IMPORTANCE_MIN, TITLE_MAX

QUERY_MAX = 20_000
SEARCH_LIMIT_MAX = 50


def is_finite_number(value: object) -> bool:
    """True for real, finite ints and floats (bools excluded)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class ValidationError(ValueError):
    """Input that cannot be stored or searched; ``details`` maps each field to its problem."""

    def __init__(self, message: str, details: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


def _text(value: Any, field: str, *, max_len: int, errors: dict[str, str]) -> str | None:
    """A non-blank string of at most ``max_len`` characters, stripped."""
    if not isinstance(value, str):
        errors[field] = "must be a string"
        return None
    stripped = value.strip()
    if not stripped:
        errors[field] = "must not be empty"
    elif len(stripped) > max_len:
        errors[field] = f"must be at most {max_len} characters (got {len(stripped)})"
    elif "\x00" in stripped:
        errors[field] = "must not contain NUL characters"
    return stripped


def _importance(value: Any, errors: dict[str, str]) -> float | None:
    """A finite number in range, rounded to IMPORTANCE_DECIMALS (5e-324 becomes 0: nothing subnormal is stored)."""
    if not is_finite_number(value):
        errors["importance"] = "must be a finite number"
        return None
    if not IMPORTANCE_MIN <= value <= IMPORTANCE_MAX:
        errors["importance"] = f"must be between {IMPORTANCE_MIN} and {IMPORTANCE_MAX}"
        return None
    return round(float(value), IMPORTANCE_DECIMALS) + 0.0  # + 0.0: -0.0 is stored as 0


def _category(value: Any, errors: dict[str, str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        errors["category"] = "must be a string or null"
        return None
    stripped = value.strip()
    if len(stripped) > CATEGORY_MAX:
        errors["category"] = f"must be at most {CATEGORY_MAX} characters (got {len(stripped)})"
    elif "\x00" in stripped:
        errors["category"] = "must not contain NUL characters"
    return stripped or None


def clean_article_fields(fields: dict[str, Any], *, partial: bool = False) -> dict[str, Any]:
    """Validate article fields; with ``partial`` only the given ones (a PATCH)."""
    allowed = {"title", "content", "category", "importance"}
    errors: dict[str, str] = {name: "unknown field" for name in fields if name not in allowed}
    cleaned: dict[str, Any] = {}
    if not partial:
        for name in ("title", "content"):
            if name not in fields:
                errors[name] = "is required"
    if "title" in fields:
        cleaned["title"] = _text(fields["title"], "title", max_len=TITLE_MAX, errors=errors)
    if "content" in fields:
        cleaned["content"] = _text(fields["content"], "content", max_len=CONTENT_MAX, errors=errors)
    if "category" in fields:
        cleaned["category"] = _category(fields["category"], errors)
    if "importance" in fields:
        cleaned["importance"] = _importance(fields["importance"], errors)
    elif not partial:
        cleaned["importance"] = 1.0
    if errors:
        raise ValidationError("invalid article", errors)
    return cleaned


def whole_number(value: Any) -> Any:
    """``3.0`` as ``3`` (JSON has one number type: a client may well send it); anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def clean_search_request(query: Any, limit: Any) -> tuple[str, int]:
    """A non-empty query and a limit between 1 and SEARCH_LIMIT_MAX."""
    errors: dict[str, str] = {}
    text = _text(query, "query", max_len=QUERY_MAX, errors=errors)
    limit = whole_number(limit)
    if isinstance(limit, bool) or not isinstance(limit, int):
        errors["limit"] = "must be an integer"
    elif not 1 <= limit <= SEARCH_LIMIT_MAX:
        errors["limit"] = f"must be between 1 and {SEARCH_LIMIT_MAX}"
    if errors:
        raise ValidationError("invalid search", errors)
    return text or "", limit
