"""Article history under /api/articles/<id>/versions: list, read one, restore (service.knowledge.versions)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from service.knowledge.articles import get_article, restore_article_version
from service.knowledge.versions import VersionConflict, VersionNotFound, get_version, list_versions
from service.web.errors import ApiError
from service.web.learning import actor, importance_cause
from service.web.requests import db, runtime

versions_api = Blueprint("versions_api", __name__, url_prefix="/api/articles")


def change_author() -> str:
    """``admin:<name>`` or ``token:<name>`` for a version's author."""
    return actor() or "anonymous"


def version_conflict(exc: VersionConflict) -> ApiError:
    """A 409 carrying the article as it is now, so the editor can merge and send again."""
    current = get_article(db(), exc.article_id, runtime().embedder.model_name)
    return ApiError(409, "version_conflict",
                    f"the article changed since version {exc.expected}: it is at version {exc.current}",
                    {"current_version": exc.current, "article": current.to_dict()})


@versions_api.get("/<int:article_id>/versions")
def versions_index(article_id: int):
    """Every version of an article, newest first (without their content)."""
    article = get_article(db(), article_id, runtime().embedder.model_name)
    versions = list_versions(db(), article_id)
    return jsonify({"article_id": article_id, "current_version": article.version,
                    "versions": [version.to_dict(with_content=False) for version in versions]})


@versions_api.get("/<int:article_id>/versions/<int:number>")
def versions_show(article_id: int, number: int):
    """One version with its content."""
    get_article(db(), article_id, runtime().embedder.model_name)
    try:
        version = get_version(db(), article_id, number)
    except VersionNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    return jsonify({"version": version.to_dict()})


@versions_api.post("/<int:article_id>/versions/<int:number>/restore")
def versions_restore(article_id: int, number: int):
    """Write an old version back as a new one; it is re-embedded at once, so search follows."""
    try:
        article = restore_article_version(db(), runtime().embedder, article_id, number, author=change_author(),
                                          cause=importance_cause())
    except VersionNotFound as exc:
        raise ApiError(404, "not_found", str(exc)) from None
    db().commit()
    return jsonify({"article": article.to_dict(), "restored_from": number})
