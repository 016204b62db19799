"""The one ticket list page (/admin/inbox, and /admin/tickets where it used to be): queues, search, filters, bulk.

Lenient like every admin page: an odd number or an unknown filter value is dropped rather than refused.
"""

from __future__ import annotations

import sqlalchemy as sa
from flask import flash, redirect, render_template, request, url_for

from service.db.models import TICKET_STATUSES, Article
from service.tickets.desk import list_desk, queue_counts
from service.tickets.team import list_profiles
from service.validation import ValidationError
from service.web.desk import filters_from, my_user_id
from service.web.errors import ApiError
from service.web.requests import db, page_count, parse_whole_number

QUEUE_LABELS = {"mine": "Mine", "unassigned": "Unassigned", "open": "Open", "pending": "Pending",
                "solved": "Solved", "all": "All", "overdue": "Overdue"}
PER_PAGE = 50


def _page_arguments(default_queue: str) -> tuple[dict[str, str], int]:
    """The query string's filters with odd values dropped, and the page number."""
    args = {k: v for k, v in request.args.items() if v != ""}
    args.setdefault("queue", default_queue)
    page = min(max(parse_whole_number(args.pop("page", None)) or 1, 1), 1_000_000)
    article_id = parse_whole_number(args.get("article_id"))
    if article_id is None or not 0 < article_id <= 2**62:
        args.pop("article_id", None)
    if args.get("status") not in TICKET_STATUSES:
        args.pop("status", None)
    return args, page


def ticket_list_page(default_queue: str = "unassigned", *, customer: str | None = None):
    """The one ticket list: a queue, the search box and filters, every queue's count, bulk actions; with
    ``customer``, only that address's tickets (the customer page)."""
    args, page = _page_arguments(default_queue)
    if customer:
        args["customer"] = customer
    try:
        filters = filters_from(args)
        items, total = list_desk(db(), filters, user_id=my_user_id(), page=page, per_page=PER_PAGE)
    except (ValidationError, ApiError) as exc:
        flash(f"Filter ignored: {'; '.join(f'{k} {v}' for k, v in exc.details.items()) or exc.message}.", "error")
        return redirect(url_for("inbox.queue"))
    article_title = db().scalar(sa.select(Article.title).where(Article.id == filters.article_id)) \
        if filters.article_id else None
    return render_template("admin/desk_list.html", items=items, total=total, page=page,
                           pages=max(1, page_count(total, PER_PAGE)), filters=filters, args=args,
                           counts=queue_counts(db(), my_user_id()), labels=QUEUE_LABELS,
                           agents=list_profiles(db()), article_title=article_title)
