"""Server-rendered admin pages under /admin. Thin views over the same use cases as the JSON API."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import Blueprint, flash, g, redirect, render_template, request, url_for

from service.accounts import authenticate, count_admins
from service.db.models import Article
from service.knowledge.articles import (
    ArticleNotFound,
    add_article,
    delete_article,
    get_article,
    list_articles,
    update_article,
)
from service.knowledge.audit import importance_history
from service.knowledge.indexing import list_sections
from service.knowledge.versions import ChangeContext, VersionConflict
from service.retrieval.ranking import formula_text, relevance_kind
from service.tickets.queries import TicketNotFound, get_ticket, list_tickets
from service.validation import ValidationError
from service.web.access import log_in, log_out, log_out_everywhere
from service.web.admin.ticket_list import ticket_list_page
from service.web.limits import clear_login_failures, login_bucket, reserve_login_attempt
from service.web.learning import actor
from service.web.requests import db, page_count, parse_whole_number, runtime

admin = Blueprint("admin", __name__, url_prefix="/admin")
PER_PAGE = 20
def importance_badge(importance: float) -> tuple[str, str]:
    """(css class, label) for an importance: critical ≥ 1.5, boosted > 1, lowered < 1, hidden ≤ 0.2."""
    if importance >= 1.5:
        return "critical", "critical"
    if importance > 1.0:
        return "boosted", "boosted"
    if importance <= 0.2:
        return "buried", "buried"
    if importance < 1.0:
        return "lowered", "lowered"
    return "normal", "normal"


def safe_next(target: str | None) -> str:
    """Only local /admin paths, so the login form cannot be used as an open redirect; else "" (the home page)."""
    parts = urlsplit(target or "")
    if target and not parts.scheme and not parts.netloc and target.startswith("/admin") and "\\" not in target:
        return target
    return ""


def home_for(role: str) -> str:
    """Where an account lands: agents on their Inbox, admins on the articles list."""
    return url_for("inbox.queue" if role == "agent" else "admin.articles")


def _page_number() -> int:
    """``?page=`` for pages: anything odd falls back to page 1 rather than an error."""
    page = parse_whole_number(request.args.get("page"))
    return min(max(page, 1), 1_000_000) if page is not None else 1


def _active_model() -> str:
    """The active embedding model's name."""
    return runtime().embedder.model_name


def _page_change() -> ChangeContext:
    """The logged-in admin as the author of a version written from these pages."""
    return ChangeContext(actor() or "anonymous", "page")


def _article_form() -> dict[str, Any]:
    """Title, content and category from the submitted form (validation happens in the use case)."""
    return {name: request.form.get(name, "") for name in ("title", "content", "category")}


@admin.app_template_filter("when")
def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "—"


@admin.app_template_filter("iso_when")
def _iso_when(value: str | None) -> str:
    return _when(datetime.fromisoformat(value)) if value else "—"


@admin.context_processor
def nav_context() -> dict[str, Any]:
    """What admin/base.html's navigation needs (other admin blueprints reuse it)."""
    return {"identity": g.get("identity"), "import_url": url_for("admin_import.upload"),
            "importance_badge": importance_badge, "weights": vars(runtime().weights),
            "relevance_kind": relevance_kind(runtime().retrieval.mode),
            "formula": formula_text(runtime().retrieval.mode, runtime().weights)}


@admin.errorhandler(ArticleNotFound)
@admin.errorhandler(TicketNotFound)
def _not_found_page(exc: LookupError):
    kind = "article" if isinstance(exc, ArticleNotFound) else "ticket"
    return render_template("admin/error.html", status=404, message=f"That {kind} does not exist."), 404


@admin.route("/login", methods=["GET", "POST"])
def login():
    """The login form; on success go to ``next`` (a local /admin path)."""
    next_url = safe_next(request.values.get("next"))
    if request.method == "POST":
        username = request.form.get("username", "")
        lockout, bucket = runtime().settings.login_lockout, login_bucket(username, request.remote_addr)
        if lockout:
            with runtime().session() as attempt:  # committed before the password check: concurrent tries see it
                reserve_login_attempt(attempt, bucket, lockout)
        found = authenticate(db(), username, request.form.get("password", ""))
        if found is not None:
            if lockout:
                clear_login_failures(db(), bucket)
            db().commit()
            log_in(found)
            flash(f"Logged in as {found.username}.", "success")
            return redirect(next_url or home_for(found.role))
        flash("Wrong username or password.", "error")
        return render_template("admin/login.html", next=next_url, username=username, no_admins=False), 401
    return render_template("admin/login.html", next=next_url, username="", no_admins=count_admins(db()) == 0)


@admin.post("/logout")
def logout():
    """End the session."""
    log_out()
    flash("Logged out.", "success")
    return redirect(url_for("admin.login"))


@admin.post("/logout-everywhere")
def logout_everywhere():
    """End every session of this account, in every browser."""
    ended = log_out_everywhere(g.identity) if g.identity.kind == "session" else 0
    flash(f"Logged out everywhere ({ended} session{'s' if ended != 1 else ''} ended).", "success")
    return redirect(url_for("admin.login"))


@admin.get("/")
def index():
    """The home page: agents land on their Inbox, admins on the articles list."""
    identity = g.get("identity")
    return redirect(home_for(identity.role if identity is not None else "admin"))


@admin.get("/articles")
def articles():
    """Articles with importance and embedding status; text search, category filter, pagination."""
    page, q, category = _page_number(), request.args.get("q", "").strip(), request.args.get("category") or None
    items, total = list_articles(db(), runtime().embedder.model_name, page=page, per_page=PER_PAGE,
                                 category=category, contains=q or None)
    categories = db().scalars(sa.select(Article.category).where(Article.category.is_not(None))
                              .distinct().order_by(Article.category)).all()
    return render_template("admin/articles.html", articles=items, total=total, page=page,
                           pages=max(1, page_count(total, PER_PAGE)), q=q, category=category, categories=categories)


@admin.route("/articles/new", methods=["GET", "POST"])
def article_new():
    """Write a new article; it is embedded on save (or stored as pending if the embedder fails)."""
    form, errors = {"title": "", "content": "", "category": "", "importance": "1.0"}, {}
    if request.method == "POST":
        form = {**_article_form(), "importance": request.form.get("importance", "1.0")}
        try:
            importance: Any = float(form["importance"])
        except ValueError:
            importance = form["importance"]  # the use case names the problem
        try:
            stored = add_article(db(), runtime().embedder, {**_article_form(), "importance": importance},
                                 change=_page_change())
        except ValidationError as exc:
            errors = exc.details
            flash(f"Not saved: {exc.message}.", "error")
        else:
            db().commit()
            flash(f"Article “{stored.title}” created ({stored.embedding_status}).", "success")
            return redirect(url_for("admin.article", article_id=stored.id))
    return render_template("admin/article_new.html", form=form, errors=errors), 400 if errors else 200


@admin.get("/articles/<int:article_id>")
def article(article_id: int):
    """One article: edit form, importance slider with what-if preview, actions."""
    stored = get_article(db(), article_id, runtime().embedder.model_name)
    _, ticket_count = list_tickets(db(), article_id=article_id, per_page=1)
    form = {"title": stored.title, "content": stored.content, "category": stored.category or ""}
    return render_template("admin/article.html", article=stored, form=form, errors={},
                           ticket_count=ticket_count, sections=list_sections(db(), article_id, _active_model()),
                           importance_log=importance_history(db(), article_id))


@admin.post("/articles/<int:article_id>")
def article_update(article_id: int):
    """Save title, content and category (changed text is re-embedded)."""
    try:
        stored = update_article(db(), runtime().embedder, article_id, _article_form(), change=_page_change(),
                                expected_version=parse_whole_number(request.form.get("version")))
    except (ValidationError, VersionConflict) as exc:
        conflict = isinstance(exc, VersionConflict)
        db().rollback()
        flash("Not saved: someone changed this article since you opened it (now version "
              f"{exc.current}). Your text is below; see History for theirs." if conflict
              else f"Not saved: {exc.message}.", "error")
        stored = get_article(db(), article_id, runtime().embedder.model_name)
        _, ticket_count = list_tickets(db(), article_id=article_id, per_page=1)
        return render_template("admin/article.html", article=stored, form=_article_form(),
                               errors={} if conflict else exc.details, ticket_count=ticket_count,
                               sections=list_sections(db(), article_id, _active_model()),
                               importance_log=importance_history(db(), article_id)), 409 if conflict else 400
    db().commit()
    flash("Changes saved." + (f" Embedding pending: {stored.embedding_error}" if stored.embedding_error else ""),
          "error" if stored.embedding_error else "success")
    return redirect(url_for("admin.article", article_id=article_id))


@admin.post("/articles/<int:article_id>/delete")
def article_delete(article_id: int):
    """Delete an article (the page asks for confirmation first)."""
    title = get_article(db(), article_id, runtime().embedder.model_name).title
    delete_article(db(), article_id, change=_page_change())
    db().commit()
    flash(f"Deleted “{title}”.", "success")
    return redirect(url_for("admin.articles"))


@admin.post("/articles/<int:article_id>/reembed")
def article_reembed(article_id: int):
    """Bring the vector up to date: embeds a pending or stale article; an embedded one is left as is."""
    before = get_article(db(), article_id, runtime().embedder.model_name)
    stored = update_article(db(), runtime().embedder, article_id, {})
    db().commit()
    if stored.embedding_error:
        flash(f"The embedding provider failed; the article stays pending: {stored.embedding_error}", "error")
    elif before.embedding_status == "embedded":
        flash(f"Already embedded with {stored.embedding_model}; nothing to do.", "info")
    else:
        flash(f"Re-embedded with {stored.embedding_model}.", "success")
    return redirect(url_for("admin.article", article_id=article_id))


@admin.get("/preview")
def preview():
    """Type a sample ticket, see the ranking with its score breakdown."""
    return render_template("admin/preview.html")


@admin.get("/tickets")
def tickets():
    """The one ticket list, as under /admin/inbox, showing every ticket by default (old links keep working)."""
    return ticket_list_page(default_queue="all")


@admin.get("/tickets/<int:ticket_id>")
def ticket(ticket_id: int):
    """One ticket: question, answer, retrieved articles with scores, feedback."""
    return render_template("admin/ticket.html", ticket=get_ticket(db(), ticket_id))
