"""HTTP JSON API under /api, plus /healthz. Thin views: validate, call one use case, return."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from flask import Blueprint, g, jsonify, request, url_for

from service.knowledge.articles import (
    add_article,
    delete_article,
    get_article,
    knowledge_stats,
    list_articles,
    update_article,
)
from service.knowledge.versions import ChangeContext, VersionConflict
from service.retrieval.ranking import formula_text
from service.retrieval.search import run_search
from service.web.errors import DATABASE_RETRY_AFTER_SECONDS, ApiError
from service.web.learning import actor, importance_cause
from service.web.requests import body_id, db, int_arg, json_body, page_count, runtime
from service.web.versions import version_conflict

log = logging.getLogger(__name__)
api = Blueprint("api", __name__, url_prefix="/api")
health = Blueprint("health", __name__)

PER_PAGE_MAX = 100
ARTICLE_FIELDS = ("title", "content", "category", "importance")
ARTICLE_UPDATE_FIELDS = (*ARTICLE_FIELDS, "version")  # version: the one the editor started from (optimistic lock)
SEARCH_FIELDS = ("query", "limit", "explain")


@api.get("/articles")
def articles_index():
    """A page of articles, newest first; ``?page=&per_page=&category=``."""
    page = int_arg("page", 1, low=1, high=1_000_000)
    per_page = int_arg("per_page", 20, low=1, high=PER_PAGE_MAX)
    items, total = list_articles(db(), runtime().embedder.model_name, page=page, per_page=per_page,
                                 category=request.args.get("category") or None)
    return jsonify({
        "articles": [item.to_dict() for item in items],
        "page": page, "per_page": per_page, "total": total, "pages": page_count(total, per_page),
    })


@api.post("/articles")
def articles_create():
    """Create an article; 201 even when embedding failed (then ``embedding_status: pending``)."""
    article = add_article(db(), runtime().embedder, json_body(ARTICLE_FIELDS), change=_change())
    db().commit()
    response = jsonify({"article": article.to_dict()})
    response.status_code = 201
    response.headers["Location"] = url_for("api.articles_show", article_id=article.id)
    return response


@api.get("/articles/<int:article_id>")
def articles_show(article_id: int):
    """One article."""
    return jsonify({"article": get_article(db(), article_id, runtime().embedder.model_name).to_dict()})


@api.patch("/articles/<int:article_id>")
def articles_update(article_id: int):
    """Change importance, title, content or category; changed text is re-embedded; importance is audited
    (``manual`` from the admin pages' slider, ``api`` from a token)."""
    body = json_body(ARTICLE_UPDATE_FIELDS)
    expected = body.pop("version", None)
    if expected is not None and body_id(expected) is None:
        raise ApiError(400, "validation_error", "invalid article", {"version": "must be a whole number from 1"})
    try:
        article = update_article(db(), runtime().embedder, article_id, body, cause=importance_cause(),
                                 change=_change(), expected_version=body_id(expected))
    except VersionConflict as exc:
        db().rollback()
        raise version_conflict(exc) from None
    db().commit()
    return jsonify({"article": article.to_dict()})


def _change() -> ChangeContext:
    """This caller as a version's author: a logged-in admin writes from the pages, a token through the API."""
    identity = g.get("identity")
    return ChangeContext(actor() or "anonymous", "page" if identity is not None and identity.kind == "session"
                         else "api")


@api.delete("/articles/<int:article_id>")
def articles_delete(article_id: int):
    """Delete an article: it goes to the trash (``/api/article-trash``) with its history."""
    delete_article(db(), article_id, change=_change())
    db().commit()
    return "", 204


@api.post("/search")
def search():
    """``{query, limit, explain}`` → ranked results with the score breakdown.

    If the embedding provider fails, results come from the full-text leg alone and
    the answer says so in ``degraded``.
    """
    body = json_body(SEARCH_FIELDS)
    explain = body.get("explain", False)
    if not isinstance(explain, bool):
        raise ApiError(400, "validation_error", "invalid search", {"explain": "must be true or false"})
    rt = runtime()
    outcome = run_search(db(), rt.embedder, body.get("query"), limit=body.get("limit", 3), weights=rt.weights,
                         retrieval=rt.retrieval)
    answer = {
        "query": body.get("query"),
        "model": rt.embedder.model_name,
        "mode": outcome.mode,
        "degraded": outcome.degraded,
        "exact": outcome.exact,
        "weights": vars(rt.weights),
        "formula": formula_text(outcome.mode, rt.weights),
        "results": [result.to_dict(explain=explain) for result in outcome.results],
    }
    if explain:
        answer["lexical_query"] = outcome.lexical_query
        answer["synonyms_used"] = outcome.synonyms_used
    return jsonify(answer)


@api.get("/stats")
def stats():
    """Article counts (total, embedded, pending, stale), active model; the vector index only for admins."""
    counts = knowledge_stats(db(), runtime().embedder.model_name)
    if g.get("identity") is None:
        counts["index"] = None  # its DDL and cluster counts describe the schema, not the help center
    return jsonify(counts)


@health.get("/healthz")
def healthz():
    """Liveness plus a database round trip."""
    try:
        db().execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        # The driver's text names the socket path or host: it goes to the log, never to the caller.
        log.warning("health check: database unreachable: %s", type(getattr(exc, "orig", None) or exc).__name__)
        raise ApiError(503, "database_unavailable", "the database is not reachable", {},
                       {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})
    return jsonify({"status": "ok", "database": "ok"})
