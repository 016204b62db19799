"""The admin's widget page: the snippet to paste, the allowed sites, the identity secret's state, a live preview."""

from __future__ import annotations

from flask import Blueprint, render_template, url_for

from service.web.admin.pages import nav_context
from service.web.requests import runtime
from service.widget.locales import all_locales

widget_admin = Blueprint("widget_admin", __name__, url_prefix="/admin/widget", template_folder="templates")
widget_admin.context_processor(nav_context)


@widget_admin.get("", endpoint="index")
def index():
    """Never the secret itself: only whether one is set."""
    settings = runtime().settings
    script = url_for("widget.loader", _external=True) if not settings.public_url \
        else settings.public_url + url_for("widget.loader")
    snippet = f'<script src="{script}" async data-locale="en"></script>'
    return render_template("widget/admin.html", active="widget", snippet=snippet,
                           origins=settings.widget_allowed_origins,
                           secret_set=bool(settings.widget_identity_secret),
                           required=settings.widget_identity_required, locales=sorted(all_locales()))
