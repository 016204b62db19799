"""Article history, drafts and trash pages: versions with a word-level diff and restore; drafts to publish; the
trash to restore from."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from service.knowledge.article_drafts import DraftNotFound, create_draft, delete_draft, list_drafts, publish_draft
from service.knowledge.articles import get_article, restore_article_version
from service.knowledge.trash import list_trash, restore_from_trash
from service.knowledge.versions import ChangeContext, VersionConflict, VersionNotFound, get_version, list_versions, \
    word_diff
from service.validation import ValidationError
from service.web.admin.pages import nav_context
from service.web.learning import importance_cause
from service.web.requests import db, parse_whole_number, runtime
from service.web.versions import change_author

admin_history = Blueprint("admin_history", __name__, url_prefix="/admin")
admin_history.context_processor(nav_context)
ARTICLE_FORM_FIELDS = ("title", "content", "category")


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


@admin_history.get("/drafts")
def drafts():
    """Drafts (unseen by customers until published) and the trash."""
    return render_template("admin/drafts.html", drafts=list_drafts(db()), trash=list_trash(db()))


@admin_history.post("/drafts/new")
def draft_new():
    """Save the new-article form, or (``article_id``) the article's edit form, as a draft."""
    fields = {name: request.form.get(name, "") for name in ARTICLE_FORM_FIELDS}
    article_id = parse_whole_number(request.form.get("article_id"))
    try:
        create_draft(db(), fields, author=change_author(), article_id=article_id)
    except ValidationError as exc:
        flash(f"Draft not saved: {exc.message}.", "error")
        return redirect(request.referrer or url_for("admin_history.drafts"))
    db().commit()
    flash("Saved as a draft: customers and search do not see it until you publish it.", "success")
    return redirect(url_for("admin_history.drafts"))


@admin_history.post("/drafts/<int:draft_id>/publish")
def draft_publish(draft_id: int):
    """Publish a draft as an article (or a new version of the one it edits)."""
    try:
        stored = publish_draft(db(), runtime().embedder, draft_id, change=ChangeContext(change_author(), "page"))
    except DraftNotFound:
        flash("That draft is gone.", "error")
        return redirect(url_for("admin_history.drafts"))
    except VersionConflict as exc:
        db().rollback()
        flash(f"Not published: the article changed since this draft began (now version {exc.current}).", "error")
        return redirect(url_for("admin_history.drafts"))
    db().commit()
    flash(f"Published “{stored.title}” (version {stored.version}).", "success")
    return redirect(url_for("admin.article", article_id=stored.id))


@admin_history.post("/drafts/<int:draft_id>/delete")
def draft_delete(draft_id: int):
    """Throw a draft away."""
    try:
        delete_draft(db(), draft_id)
    except DraftNotFound:
        pass  # already gone: the page shows what is left
    db().commit()
    return redirect(url_for("admin_history.drafts"))


@admin_history.post("/trash/<int:article_id>/restore")
def trash_restore(article_id: int):
    """Put a deleted article back with its history."""
    stored = restore_from_trash(db(), runtime().embedder, article_id, author=change_author())
    db().commit()
    flash(f"Restored “{stored.title}” as version {stored.version}.", "success")
    return redirect(url_for("admin.article", article_id=stored.id))
