"""One JSON error shape for every failure: ``{"error": {"code", "message", "details"}}``; HTML under /admin."""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from service.knowledge.articles import ArticleNotFound
from service.providers.embeddings import EmbeddingError
from service.tickets.queries import FeedbackNotAllowed, TicketNotFound
from service.validation import ValidationError

log = logging.getLogger(__name__)
DATABASE_RETRY_AFTER_SECONDS = 5


class ApiError(Exception):
    """An error a view raises to answer with a given status and code (and optional extra headers)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or {}
        self.headers = headers or {}


def is_page(path: str) -> bool:
    """Server-rendered admin pages (anything under /admin): people, not scripts, read these."""
    return path == "/admin" or path.startswith("/admin/")


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Response:
    """Build the one error shape."""
    response = jsonify({"error": {"code": code, "message": message, "details": details or {}}})
    response.status_code = status
    return response


def _answer(status: int, code: str, message: str, details: dict[str, Any] | None = None,
            headers: dict[str, str] | None = None) -> Response:
    """The error shape, or for /admin pages the HTML error page (JSON if even that cannot be drawn)."""
    response = None
    if is_page(request.path):
        try:
            response = Response(render_template("admin/error.html", status=status, message=message), status)
        except Exception:  # a broken page must not hide the original error
            log.exception("could not render the error page")
    response = response or error_response(status, code, message, details)
    response.headers.update(headers or {})
    return response


def _code_for(exc: HTTPException) -> str:
    return (exc.name or "error").lower().replace(" ", "_").replace("'", "")


# SQLSTATE classes and codes that mean the server is unreachable or going away: the only "outage".
_OUTAGE_CLASSES = ("08", "53")  # connection exception; insufficient resources (e.g. too many connections)
_OUTAGE_CODES = frozenset({"57P01", "57P02", "57P03"})  # admin/crash shutdown, cannot connect now
_TIMEOUT_CODES = frozenset({"57014"})  # query_canceled: the statement timeout
_TOO_COMPLEX_CLASS = "54"  # program limit exceeded: stack depth, statement too complex, too many columns


def database_error_cause(exc: sa.exc.SQLAlchemyError) -> str:
    """Why a database call failed: ``outage``, ``timeout``, ``too_complex``, ``refused_value`` or ``other``."""
    if isinstance(exc, sa.exc.DataError):
        return "refused_value"
    if isinstance(exc, (sa.exc.InterfaceError, sa.exc.TimeoutError)):
        return "outage"  # the driver lost the connection, or the pool had none to give
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if sqlstate is None:
        # No answer from the server at all (refused, reset, closed): an outage, unless it is no driver error.
        return "outage" if isinstance(exc, sa.exc.OperationalError) else "other"
    if sqlstate in _TIMEOUT_CODES:
        return "timeout"
    if sqlstate.startswith(_TOO_COMPLEX_CLASS):
        return "too_complex"
    if sqlstate.startswith(_OUTAGE_CLASSES) or sqlstate in _OUTAGE_CODES:
        return "outage"
    return "other"


def _database_error(exc: sa.exc.SQLAlchemyError) -> Response:
    """Map a database error by its cause: only a real outage says ``database_unavailable`` (503, retry)."""
    cause = database_error_cause(exc)
    log.warning("database error (%s): %s", cause, type(getattr(exc, "orig", None) or exc).__name__)
    if cause == "refused_value":
        return _answer(400, "invalid_input", "a value in the request cannot be stored or searched")
    if cause == "too_complex":
        return _answer(400, "query_too_complex", "the request is too complex to run; shorten or simplify it")
    if cause == "timeout":
        return _answer(503, "statement_timeout", "the database took too long to answer; try again, or simplify "
                       "the request", {}, {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})
    if cause == "outage":
        return _answer(503, "database_unavailable", "the database is unavailable; try again shortly", {},
                       {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})
    log.error("unexpected database error", exc_info=exc)
    return _answer(500, "internal_error", "an unexpected error occurred")


def register_error_handlers(app: Flask) -> None:
    """Answer every error, expected or not, in the JSON shape (or the admin error page)."""

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> Response:
        return _answer(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError) -> Response:
        return _answer(400, "validation_error", exc.message, exc.details)

    @app.errorhandler(ArticleNotFound)
    def _not_found(exc: ArticleNotFound) -> Response:
        return _answer(404, "not_found", f"article {exc.args[0]} does not exist", {"id": exc.args[0]})

    @app.errorhandler(TicketNotFound)
    def _ticket_not_found(exc: TicketNotFound) -> Response:
        return _answer(404, "not_found", f"ticket {exc.args[0]} does not exist", {"id": exc.args[0]})

    @app.errorhandler(FeedbackNotAllowed)
    def _feedback_not_allowed(exc: FeedbackNotAllowed) -> Response:
        return _answer(403, "forbidden", f"only the submitter of ticket {exc.args[0]} (send the secret returned "
                       "at submission in the X-Ticket-Secret header) or an admin may give feedback on it",
                       {"X-Ticket-Secret": "missing or wrong"})

    @app.errorhandler(EmbeddingError)
    def _embedding(exc: EmbeddingError) -> Response:
        return _answer(503, "embedding_unavailable", "the embedding provider failed; try again later",
                       {"reason": str(exc)}, {"Retry-After": "30"})

    @app.errorhandler(sa.exc.DataError)
    @app.errorhandler(sa.exc.OperationalError)
    @app.errorhandler(sa.exc.InterfaceError)
    @app.errorhandler(sa.exc.TimeoutError)
    def _database(exc: sa.exc.SQLAlchemyError) -> Response:
        return _database_error(exc)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        headers = {}
        if exc.code == 405 and exc.valid_methods:
            headers["Allow"] = ", ".join(sorted(exc.valid_methods))
        return _answer(exc.code or 500, _code_for(exc), exc.description or exc.name, {}, headers)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error")
        return _answer(500, "internal_error", "an unexpected error occurred")
