"""One JSON error shape for every failure: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from service.knowledge.articles import ArticleNotFound
from service.providers.embeddings import EmbeddingError
from service.tickets.queries import TicketNotFound
from service.validation import ValidationError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error a view raises to answer with a given status and code."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or {}


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Response:
    """Build the one error shape."""
    response = jsonify({"error": {"code": code, "message": message, "details": details or {}}})
    response.status_code = status
    return response


def _code_for(exc: HTTPException) -> str:
    return (exc.name or "error").lower().replace(" ", "_").replace("'", "")


def register_error_handlers(app: Flask) -> None:
    """Answer every error, expected or not, in the JSON shape."""

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> Response:
        return error_response(exc.status, exc.code, exc.message, exc.details)

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError) -> Response:
        return error_response(400, "validation_error", exc.message, exc.details)

    @app.errorhandler(ArticleNotFound)
    def _not_found(exc: ArticleNotFound) -> Response:
        return error_response(404, "not_found", f"article {exc.args[0]} does not exist", {"id": exc.args[0]})

    @app.errorhandler(TicketNotFound)
    def _ticket_not_found(exc: TicketNotFound) -> Response:
        return error_response(404, "not_found", f"ticket {exc.args[0]} does not exist", {"id": exc.args[0]})

    @app.errorhandler(EmbeddingError)
    def _embedding(exc: EmbeddingError) -> Response:
        return error_response(503, "embedding_unavailable", "the embedding provider failed; try again later",
                              {"reason": str(exc)})

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        response = error_response(exc.code or 500, _code_for(exc), exc.description or exc.name)
        if exc.code == 405 and exc.valid_methods:
            response.headers["Allow"] = ", ".join(sorted(exc.valid_methods))
        return response

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error")
        return error_response(500, "internal_error", "an unexpected error occurred")
