"""The OpenAPI operations and schemas of article history and customer data (issue 36), kept beside the rest."""

from __future__ import annotations

from typing import Any

from service.web.openapi_schemas import INTEGER, NUMBER, STRING, TIMESTAMP, nullable, obj, ref

EMAIL = {"type": "string", "minLength": 3, "maxLength": 320}
VERSION_FIELDS = {"article_id": INTEGER, "number": INTEGER, "title": STRING, "category": nullable(STRING),
                  "importance": NUMBER, "author": STRING, "source": STRING, "created_at": TIMESTAMP}
COUNTS = {"type": "object", "additionalProperties": INTEGER}

PRIVACY_SCHEMAS: dict[str, Any] = {
    "VersionSummary": obj(VERSION_FIELDS, list(VERSION_FIELDS)),
    "Version": obj({**VERSION_FIELDS, "content": STRING}, [*VERSION_FIELDS, "content"]),
    "VersionList": obj({"article_id": INTEGER, "current_version": INTEGER,
                        "versions": {"type": "array", "items": ref("VersionSummary")}},
                       ["article_id", "current_version", "versions"]),
    "VersionEnvelope": obj({"version": ref("Version")}, ["version"]),
    "VersionRestored": obj({"article": ref("Article"), "restored_from": INTEGER}, ["article", "restored_from"]),
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
        ("/api/customers/export", "get", "privacy_api.customer_export",
         "A ZIP of everything stored about one customer (admins only)", None, ("200", None),
         [{**query("email", EMAIL, "the customer's e-mail address"), "required": True}]),
        ("/api/customers/erase", "post", "privacy_api.customer_erase",
         "Erase one customer's personal data (admins only; the address typed twice); answers the counts",
         "CustomerErase", ("200", "CustomerErased"), []),
    ]
