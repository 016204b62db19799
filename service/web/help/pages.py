"""The help center's pages. Thin views: validate, call one use case, commit, redirect (forms work without JS).

The three POST views stay one small function each so a rate-limit decorator can wrap them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Blueprint, Response, redirect, render_template, request, url_for

from service.db.models import Article, Ticket
from service.knowledge.articles import ArticleNotFound, get_article
from service.tickets.helpdesk import (
    LINK_VERIFIED,
    CustomerTicket,
    answer_sources,
    customer_ticket,
    record_signed_link_opened,
    escalate,
    follow_up,
    mark_solved,
    ticket_fields,
)
from service.tickets.notifications import notify_customer_reply, notify_unassigned
from service.tickets.ratings import current_rating
from service.tickets.thread import public_thread
from service.tickets.work import acknowledge
from service.tickets.queries import TicketNotFound
from service.tickets.attachments import attachments_by_message
from service.tickets.secrets import new_ticket_secret
from service.tickets.solving import solve_ticket
from service.tickets.validation import BODY_MAX, is_email
from service.tickets.workflow import answer_ticket
from service.validation import ValidationError
from service.web.errors import ApiError
from service.web.help.markdown import render_answer, render_article, section_anchor
from service.links import LINK_PARAMETER, verify_ticket_link
from service.web.limits import acknowledgement_allowed
from service.web.requests import db, runtime

help_pages = Blueprint("help", __name__, url_prefix="/help")
TICKET_COOKIE_SECONDS = 90 * 86400  # the customer's browser keeps the way back to the ticket for 90 days
help_root = Blueprint("help_root", __name__)


@help_root.get("/")
def root():
    """The site's front door is the help center."""
    return redirect(url_for("help.index"))


@help_pages.context_processor
def _suggestion_floor() -> dict[str, Any]:
    """Suggestions below the gate's similarity floor would be as off-topic as the answers it refuses."""
    return {"suggestion_floor": runtime().settings.answer_min_similarity}


@help_pages.after_request
def _security_headers(response):
    response.headers.setdefault("Content-Security-Policy",
                                "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
    response.headers.setdefault("X-Frame-Options", "DENY")
    # An old-style ticket link carries its secret in the URL: never send it on to another page or site.
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("Cache-Control", "no-store")
    return response


@help_pages.errorhandler(ApiError)
def _error_page(exc: ApiError):
    """The help center's own error page (a 429 keeps its Retry-After)."""
    return render_template("help/error.html", status=exc.status, message=exc.message), exc.status, exc.headers


@help_pages.errorhandler(ArticleNotFound)
@help_pages.errorhandler(TicketNotFound)
def _not_found_page(exc: LookupError):
    kind = "article" if isinstance(exc, ArticleNotFound) else "ticket"
    return render_template("help/error.html", status=404,
                           message=f"We could not find that {kind}. Check the link and try again."), 404


def article_url(article_id: int, section: str | None = None) -> str:
    """A public article page, at the section's heading when there is one."""
    return url_for("help.article", article_id=article_id, _anchor=section_anchor(section))


def _categories() -> list[tuple[str, list[Any]]]:
    """Every article's id and title, grouped by category (categories sorted, "Other" last).

    A read of two columns kept here because service/knowledge is being reworked; it belongs there afterwards.
    """
    rows = db().execute(sa.select(Article.id, Article.title, Article.category)
                        .order_by(Article.category.nulls_last(), Article.title)).all()
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(row.category or "Other", []).append(row)
    return list(groups.items())


@help_pages.get("")
def index():
    """Describe your problem; suggestions as you type; the categories below."""
    return render_template("help/index.html", description="", email="", error=None, categories=_categories())


@help_pages.post("/ask")
def ask():
    """Store and answer the question, then show it on its ticket page (the secret link).

    "Talk to a person" (``person=1`` with an email) also sends it straight to an agent.
    """
    description, email = request.form.get("description", "").strip(), request.form.get("email", "").strip()
    person = request.form.get("person") == "1"
    error = None
    if not description or len(description) > BODY_MAX:
        error = f"Please describe your problem (up to {BODY_MAX:,} characters)."
    elif person and not is_email(email):
        error = "Please enter the email address an agent should reply to."
    if error:
        return render_template("help/index.html", description=description, email=email, error=error,
                               categories=_categories()), 400
    secret, digest = new_ticket_secret()
    ticket_id = answer_ticket(runtime(), runtime().chat, ticket_fields(description), secret_sha256=digest,
                              channel="web")
    if person:
        _escalate(ticket_id, secret, email, asked_for_person=True)
        db().commit()
    return _with_ticket_cookie(redirect(url_for("help.ticket", ticket_id=ticket_id), 303), ticket_id, secret)


def _ticket_cookie(ticket_id: int) -> str:
    return f"ticket_{ticket_id}"


def _with_ticket_cookie(response: Response, ticket_id: int, secret: str) -> Response:
    """Keep the ticket's secret in a cookie for its page only, so no URL (nor any log of one) holds it."""
    response.set_cookie(_ticket_cookie(ticket_id), secret, max_age=TICKET_COOKIE_SECONDS,
                        path=url_for("help.ticket", ticket_id=ticket_id), httponly=True, samesite="Lax",
                        secure=runtime().settings.secure_cookies)
    return response


def _ticket_key(ticket_id: int) -> str:
    """The ticket's secret: from the form that was posted, else from the ticket's cookie."""
    return request.form.get("key") or request.cookies.get(_ticket_cookie(ticket_id), "")


def _signed_link() -> str:
    """The signed link's token, from the query string or the form the page posted."""
    return request.form.get(LINK_PARAMETER) or request.args.get(LINK_PARAMETER, "")


def _ticket_access(ticket_id: int) -> Any:
    """LINK_VERIFIED for a valid signed link (an e-mail's, opened on any device), else the ticket's secret."""
    if verify_ticket_link(runtime().settings, ticket_id, _signed_link(), purpose="view"):
        record_signed_link_opened(db(), ticket_id)  # committed with the form's own change
        return LINK_VERIFIED
    return _ticket_key(ticket_id)


def _ticket_page(view: CustomerTicket, key: Any, *, email: str = "", error: str | None = None,
                 status: int = 200):
    sources = answer_sources(db(), view.ticket)
    links = {s.number: article_url(s.article_id, s.section) for s in sources}
    answer = render_answer(view.ticket.answer, links) if view.ticket.answer else None
    messages = [m for m in public_thread(db(), view.ticket.id) if m.kind != "ai_answer"]
    thread = messages[1:]  # after the answer
    files = attachments_by_message(db(), view.ticket.id)
    signed = key is LINK_VERIFIED
    return render_template("help/ticket.html", view=view, t=view.ticket, key="" if signed else key,
                           link=_signed_link() if signed else "", sources=sources, links=links,
                           answer=answer, email=email or view.ticket.email or "", error=error,
                           thread=thread, files=files,
                           question_files=files.get(messages[0].id, []) if messages else [],
                           rating=current_rating(db(), view.ticket.id)), status


def _escalate(ticket_id: int, key: Any, email: str, *, asked_for_person: bool) -> None:
    """Send the ticket to an agent and, the first time (decided under the row lock), queue the e-mail."""
    settings = runtime().settings
    view = escalate(db(), ticket_id, key, email=email, asked_for_person=asked_for_person,
                    first_response_hours=settings.first_response_hours)
    if view.escalated_now and acknowledgement_allowed():
        acknowledge(db(), settings, ticket_id, answer=None)
        notify_unassigned(db(), settings, db().get(Ticket, ticket_id))


def _back_to_ticket(ticket_id: int, key: Any, anchor: str) -> Response:
    """After a form: the ticket page again (with the signed link when that is how it was opened)."""
    link = {LINK_PARAMETER: _signed_link()} if key is LINK_VERIFIED else {}
    return redirect(url_for("help.ticket", ticket_id=ticket_id, _anchor=anchor, **link), 303)


@help_pages.get("/tickets/<int:ticket_id>")
def ticket(ticket_id: int):
    """The customer's ticket: the answer, its sources, and whether an agent has it. Wrong key → 404.

    A link with ``?key=`` (from before the cookie) is exchanged once for the cookie and a clean URL. A signed
    ``?link=`` (every customer e-mail's) opens the page as it is, with no cookie, on any device.
    """
    if verify_ticket_link(runtime().settings, ticket_id, request.args.get(LINK_PARAMETER), purpose="view"):
        view = customer_ticket(db(), ticket_id, LINK_VERIFIED)
        record_signed_link_opened(db(), ticket_id)  # its address reads our mail: later ones may quote it
        db().commit()
        return _ticket_page(view, LINK_VERIFIED)
    if "key" in request.args:
        key = request.args["key"]
        customer_ticket(db(), ticket_id, key)  # a wrong key is a 404 here, and sets no cookie
        return _with_ticket_cookie(redirect(url_for("help.ticket", ticket_id=ticket_id), 303), ticket_id, key)
    key = _ticket_key(ticket_id)
    return _ticket_page(customer_ticket(db(), ticket_id, key), key)


@help_pages.post("/tickets/<int:ticket_id>/solved")
def solved(ticket_id: int):
    """"Yes, this solved it": recorded as self-served."""
    key = _ticket_access(ticket_id)
    mark_solved(db(), ticket_id, key)
    db().commit()
    solve_ticket(runtime(), ticket_id)
    return _back_to_ticket(ticket_id, key, "outcome")


@help_pages.post("/tickets/<int:ticket_id>/escalate", endpoint="escalate")
def escalate_ticket(ticket_id: int):
    """"No" or "talk to a person": an agent gets the ticket and replies to the email given."""
    key, email = _ticket_access(ticket_id), request.form.get("email", "").strip()
    try:
        _escalate(ticket_id, key, email, asked_for_person=request.form.get("person") == "1")
    except ValidationError:
        db().rollback()
        return _ticket_page(customer_ticket(db(), ticket_id, key), key, email=email, status=400,
                            error="Please enter the email address an agent should reply to.")
    db().commit()
    return _back_to_ticket(ticket_id, key, "outcome")


@help_pages.post("/tickets/<int:ticket_id>/reply", endpoint="follow_up")
def follow_up_ticket(ticket_id: int):
    """The customer writes again: added to the thread; the ticket goes back to an agent."""
    key = _ticket_access(ticket_id)
    try:
        follow_up(db(), ticket_id, key, request.form.get("body", ""),
                  first_response_hours=runtime().settings.first_response_hours)
        notify_customer_reply(db(), runtime().settings, db().get(Ticket, ticket_id), request.form["body"].strip())
    except ValidationError:
        db().rollback()
        return _ticket_page(customer_ticket(db(), ticket_id, key), key, status=400,
                            error="Please write your message (up to 20,000 characters).")
    db().commit()
    return _back_to_ticket(ticket_id, key, "thread")  # no secret in the URL


@help_pages.get("/articles")
def articles():
    """Every article, by category."""
    return render_template("help/articles.html", categories=_categories())


@help_pages.get("/articles/<int:article_id>")
def article(article_id: int):
    """One article, rendered safely, each section's heading an anchor."""
    stored = get_article(db(), article_id, runtime().embedder.model_name)
    return render_template("help/article.html", article=stored, body=render_article(stored.content))
