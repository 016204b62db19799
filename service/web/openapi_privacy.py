"""The OpenAPI operations and schemas of article history and customer data (issue 36), kept beside the rest."""

from __future__ import annotations

from typing import Any

from service.web.openapi_schemas import ARTICLE_FIELDS, INTEGER, NUMBER, STRING, TIMESTAMP, nullable, obj, ref

EMAIL = {"type": "string", "minLength": 3, "maxLength": 320}
VERSION_FIELDS = {"article_id": INTEGER, "number": INTEGER, "title": STRING, "category": nullable(STRING),
                  "importance": NUMBER, "author": STRING, "source": STRING, "created_at": TIMESTAMP}
DRAFT_FIELDS = ARTICLE_FIELDS
COUNTS = {"type": "object", "additionalProperties": INTEGER}

PRIVACY_SCHEMAS: dict[str, Any] = {
    "VersionSummary": obj(VERSION_FIELDS, list(VERSION_FIELDS)),
    "Version": obj({**VERSION_FIELDS, "content": STRING}, [*VERSION_FIELDS, "content"]),
    "VersionList": obj({"article_id": INTEGER, "current_version": INTEGER,
                        "versions": {"type": "array", "items": ref("VersionSummary")}},
                       ["article_id", "current_version", "versions"]),
    "VersionEnvelope": obj({"version": ref("Version")}, ["version"]),
    "VersionRestored": obj({"article": ref("Article"), "restored_from": INTEGER}, ["article", "restored_from"]),
    "ArticleDraftCreate": obj({**DRAFT_FIELDS, "article_id": {"type": "integer", "minimum": 1}}, closed=True),
    "ArticleDraftUpdate": obj(DRAFT_FIELDS, closed=True),
    "ArticleDraft": obj({"id": INTEGER, "article_id": nullable(INTEGER), "base_version": nullable(INTEGER),
                         "title": STRING, "content": STRING, "category": nullable(STRING), "importance": NUMBER,
                         "author": STRING, "created_at": TIMESTAMP, "updated_at": TIMESTAMP},
                        ["id", "article_id", "title", "content", "author"]),
    "ArticleDraftEnvelope": obj({"draft": ref("ArticleDraft")}, ["draft"]),
    "ArticleDraftList": obj({"drafts": {"type": "array", "items": ref("ArticleDraft")}}, ["drafts"]),
    "ArticleTrash": obj({"trash": {"type": "array", "items": obj({
        "id": INTEGER, "title": STRING, "category": nullable(STRING), "version": INTEGER, "deleted_at": TIMESTAMP,
        "deleted_by": STRING}, ["id", "title", "version", "deleted_at", "deleted_by"])}}, ["trash"]),
    "CustomerErase": obj({"email": EMAIL, "confirm": EMAIL, "dry_run": {"type": "boolean"}}, ["email", "confirm"],
                         closed=True),
    "CustomerErased": obj({"dry_run": {"type": "boolean"}, "counts": COUNTS}, ["dry_run", "counts"]),
}


def privacy_operations(query, path_id) -> list[tuple]:
    """The operations, in service.web.openapi's tuple form."""
    article, version = path_id("article_id"), path_id("number")
    return [
        ("/api/articles/{article_id}/versions", "get", "versions_api.versions_index",
         "An article's versions, newest first (author, source, time; no content)", None, ("200", "VersionList"),
         [article]),
        ("/api/articles/{article_id}/versions/{number}", "get", "versions_api.versions_show",
         "One version of an article, with its content", None, ("200", "VersionEnvelope"), [article, version]),
        ("/api/articles/{article_id}/versions/{number}/restore", "post", "versions_api.versions_restore",
         "Write an old version back as a new version (re-embedded at once)", None, ("200", "VersionRestored"),
         [article, version]),
        ("/api/article-drafts", "get", "drafts_api.drafts_index", "Article drafts (unseen by customers and search)",
         None, ("200", "ArticleDraftList"), []),
        ("/api/article-drafts", "post", "drafts_api.drafts_create",
         "Save a draft of a new article, or of an edit (`article_id`)", "ArticleDraftCreate",
         ("201", "ArticleDraftEnvelope"), []),
        ("/api/article-drafts/{draft_id}", "get", "drafts_api.drafts_show", "One draft", None,
         ("200", "ArticleDraftEnvelope"), [path_id("draft_id")]),
        ("/api/article-drafts/{draft_id}", "patch", "drafts_api.drafts_update", "Change a draft",
         "ArticleDraftUpdate", ("200", "ArticleDraftEnvelope"), [path_id("draft_id")]),
        ("/api/article-drafts/{draft_id}", "delete", "drafts_api.drafts_delete", "Throw a draft away", None,
         ("204", None), [path_id("draft_id")]),
        ("/api/article-drafts/{draft_id}/publish", "post", "drafts_api.drafts_publish",
         "Publish a draft: a new article or a new version (409 if the article changed since)", None,
         ("200", "ArticleEnvelope"), [path_id("draft_id")]),
        ("/api/article-trash", "get", "drafts_api.trash_index", "Deleted articles, restorable for ARTICLE_TRASH_DAYS",
         None, ("200", "ArticleTrash"), []),
        ("/api/article-trash/{article_id}/restore", "post", "drafts_api.trash_restore",
         "Restore a deleted article with its history (a new version, embedded at once)", None,
         ("200", "ArticleEnvelope"), [article]),
        ("/api/customers/export", "get", "privacy_api.customer_export",
         "A ZIP of everything stored about one customer (admins only)", None, ("200", None),
         [{**query("email", EMAIL, "the customer's e-mail address"), "required": True}]),
        ("/api/customers/erase", "post", "privacy_api.customer_erase",
         "Erase one customer's personal data (admins only; the address typed twice); answers the counts",
         "CustomerErase", ("200", "CustomerErased"), []),
    ]
