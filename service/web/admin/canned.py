"""Canned replies (/admin/canned): agents read them in the composer; admins add, edit and delete them."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from service.tickets.canned import PLACEHOLDERS, add_canned, delete_canned, list_canned, update_canned
from service.validation import ValidationError
from service.web.admin.pages import nav_context
from service.web.requests import db

canned = Blueprint("canned", __name__, url_prefix="/admin/canned")
canned.context_processor(nav_context)


@canned.get("", endpoint="index")
def index():
    """Every canned reply, and the form to add one."""
    return render_template("admin/canned.html", replies=list_canned(db()), placeholders=PLACEHOLDERS,
                           form={"title": "", "body": ""})


@canned.post("", endpoint="create")
def create():
    """Save a canned reply (admins)."""
    form = {"title": request.form.get("title", ""), "body": request.form.get("body", "")}
    try:
        add_canned(db(), form["title"], form["body"])
    except ValidationError as exc:
        flash(f"Not saved: {'; '.join(f'{k} {v}' for k, v in exc.details.items())}.", "error")
        return render_template("admin/canned.html", replies=list_canned(db()), placeholders=PLACEHOLDERS,
                               form=form), 400
    db().commit()
    flash(f"Canned reply “{form['title'].strip()}” saved.", "success")
    return redirect(url_for("canned.index"))


@canned.post("/<int:canned_id>", endpoint="update")
def update(canned_id: int):
    """Change a canned reply's title and text (admins)."""
    form = {"title": request.form.get("title", ""), "body": request.form.get("body", "")}
    try:
        changed = update_canned(db(), canned_id, form["title"], form["body"])
    except ValidationError as exc:
        flash(f"Not saved: {'; '.join(f'{k} {v}' for k, v in exc.details.items())}.", "error")
        return render_template("admin/canned.html", replies=list_canned(db()), placeholders=PLACEHOLDERS,
                               form={"title": "", "body": ""}), 400
    if changed is None:
        flash("That canned reply no longer exists.", "error")
        return redirect(url_for("canned.index")), 303
    db().commit()
    flash(f"Canned reply “{changed.title}” saved.", "success")
    return redirect(url_for("canned.index"))


@canned.post("/<int:canned_id>/delete", endpoint="delete")
def delete(canned_id: int):
    """Delete a canned reply (admins)."""
    delete_canned(db(), canned_id)
    db().commit()
    flash("Canned reply deleted.", "success")
    return redirect(url_for("canned.index"))
