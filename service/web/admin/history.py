"""The article history page: versions, a word-level diff between any two, and a restore button."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from service.knowledge.articles import get_article, restore_article_version
from service.knowledge.versions import VersionNotFound, get_version, list_versions, word_diff
from service.web.learning import importance_cause
from service.web.requests import db, parse_whole_number, runtime
from service.web.versions import change_author

admin_history = Blueprint("admin_history", __name__, url_prefix="/admin")


@admin_history.get("/articles/<int:article_id>/history")
def history(article_id: int):
    """Every version, newest first; ``?a=&b=`` picks the two to compare (default: the previous and the newest)."""
    article = get_article(db(), article_id, runtime().embedder.model_name)
    versions = list_versions(db(), article_id)
    numbers = [version.number for version in versions]
    newest = numbers[0] if numbers else article.version
    b = parse_whole_number(request.args.get("b")) or newest
    a = parse_whole_number(request.args.get("a")) or max(1, b - 1)
    diffs = None
    try:
        old, new = get_version(db(), article_id, a), get_version(db(), article_id, b)
        diffs = {"title": word_diff(old.title, new.title), "content": word_diff(old.content, new.content)}
    except VersionNotFound:
        flash("No such version to compare.", "error")
    return render_template("admin/history.html", article=article, versions=versions, a=a, b=b, diffs=diffs)


@admin_history.post("/articles/<int:article_id>/versions/<int:number>/restore")
def restore(article_id: int, number: int):
    """Write version ``number`` back as a new version (re-embedded at once)."""
    try:
        stored = restore_article_version(db(), runtime().embedder, article_id, number, author=change_author(),
                                         cause=importance_cause())
    except VersionNotFound:
        flash(f"There is no version {number}.", "error")
        return redirect(url_for("admin_history.history", article_id=article_id))
    db().commit()
    flash(f"Restored version {number} as version {stored.version}.", "success")
    return redirect(url_for("admin_history.history", article_id=article_id))
