"""Assertions shared by the HTTP tests."""

from __future__ import annotations

from typing import Any


def assert_error(response, status: int, code: str) -> dict[str, Any]:
    """Assert the one error shape ``{"error": {"code", "message", "details"}}``; return the inner object."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    return error
