"""JSON endpoints only the admin pages need (admin-only, like every endpoint not declared public)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from service.retrieval.preview import PREVIEW_LIMIT_DEFAULT, preview_ranking
from service.validation import whole_number
from service.web.errors import ApiError
from service.web.requests import db, json_body, runtime

admin_api = Blueprint("admin_api", __name__, url_prefix="/api/admin")


@admin_api.post("/preview")
def preview():
    """``{query, limit?, article_id?}`` → the ranking /api/search gives, plus that article's breakdown."""
    body = json_body(("query", "limit", "article_id"))
    article_id = whole_number(body.get("article_id"))
    if article_id is not None and (isinstance(article_id, bool) or not isinstance(article_id, int)):
        raise ApiError(400, "validation_error", "invalid preview", {"article_id": "must be an integer"})
    result = preview_ranking(db(), runtime(), body.get("query"),
                             limit=whole_number(body.get("limit", PREVIEW_LIMIT_DEFAULT)),
                             article_id=article_id)
    return jsonify(result.to_dict())
