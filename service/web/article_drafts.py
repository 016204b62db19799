"""Article drafts under /api/article-drafts and the trash under /api/article-trash (issue 36)."""

from __future__ import annotations

from flask import Blueprint, jsonify, url_for

from service.knowledge.article_drafts import (
    DraftNotFound,
    create_draft,
    delete_draft,
    get_draft,
    list_drafts,
    publish_draft,
    update_draft,
)
from service.knowledge.trash import list_trash, restore_from_trash
from service.knowledge.versions import ChangeContext, VersionConflict
from service.web.errors import ApiError
from service.web.requests import body_id, db, json_body, runtime
from service.web.versions import change_author, version_conflict

drafts_api = Blueprint("drafts_api", __name__, url_prefix="/api")
DRAFT_FIELDS = ("title", "content", "category", "importance")


def _not_found(exc: DraftNotFound) -> ApiError:
    return ApiError(404, "not_found", f"no draft {exc.args[0]}")


@drafts_api.get("/article-drafts")
def drafts_index():
    """Drafts, most recently changed first."""
    return jsonify({"drafts": [draft.to_dict() for draft in list_drafts(db())]})


@drafts_api.post("/article-drafts")
def drafts_create():
    """A draft of a new article, or with ``article_id`` an edit of one (unseen by customers until published)."""
    body = json_body((*DRAFT_FIELDS, "article_id"))
    article_id = body.pop("article_id", None)
    if article_id is not None and body_id(article_id) is None:
        raise ApiError(400, "validation_error", "invalid draft", {"article_id": "must be an article id"})
    draft = create_draft(db(), body, author=change_author(), article_id=body_id(article_id))
    db().commit()
    response = jsonify({"draft": draft.to_dict()})
    response.status_code = 201
    response.headers["Location"] = url_for("drafts_api.drafts_show", draft_id=draft.id)
    return response


@drafts_api.get("/article-drafts/<int:draft_id>")
def drafts_show(draft_id: int):
    """One draft."""
    try:
        return jsonify({"draft": get_draft(db(), draft_id).to_dict()})
    except DraftNotFound as exc:
        raise _not_found(exc) from None


@drafts_api.patch("/article-drafts/<int:draft_id>")
def drafts_update(draft_id: int):
    """Change a draft."""
    try:
        draft = update_draft(db(), draft_id, json_body(DRAFT_FIELDS), author=change_author())
    except DraftNotFound as exc:
        raise _not_found(exc) from None
    db().commit()
    return jsonify({"draft": draft.to_dict()})


@drafts_api.delete("/article-drafts/<int:draft_id>")
def drafts_delete(draft_id: int):
    """Throw a draft away."""
    try:
        delete_draft(db(), draft_id)
    except DraftNotFound as exc:
        raise _not_found(exc) from None
    db().commit()
    return "", 204


@drafts_api.post("/article-drafts/<int:draft_id>/publish")
def drafts_publish(draft_id: int):
    """Publish: a new article, or a new version of the one it edits (409 if that changed since)."""
    try:
        article = publish_draft(db(), runtime().embedder, draft_id, change=ChangeContext(change_author(), "api"))
    except DraftNotFound as exc:
        raise _not_found(exc) from None
    except VersionConflict as exc:
        db().rollback()
        raise version_conflict(exc) from None
    db().commit()
    return jsonify({"article": article.to_dict()})


@drafts_api.get("/article-trash")
def trash_index():
    """Deleted articles, restorable until ARTICLE_TRASH_DAYS pass."""
    return jsonify({"trash": [item.to_dict() for item in list_trash(db())]})


@drafts_api.post("/article-trash/<int:article_id>/restore")
def trash_restore(article_id: int):
    """Put a deleted article back with its history (a new version), embedded at once."""
    article = restore_from_trash(db(), runtime().embedder, article_id, author=change_author())
    db().commit()
    return jsonify({"article": article.to_dict()})
