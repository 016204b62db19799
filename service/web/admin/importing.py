"""Admin page to upload markdown files into the knowledge base (service.knowledge.importer does the work)."""

from __future__ import annotations

from flask import Blueprint, flash, render_template, request

from service.knowledge.importer import import_markdown_files
from service.web.requests import db, runtime

admin_import = Blueprint("admin_import", __name__, url_prefix="/admin")
MAX_FILES = 50


@admin_import.route("/import", methods=["GET", "POST"], endpoint="upload")
def upload():
    """Upload .md files; re-uploading a file with the same name updates (or skips) its article."""
    report = None
    if request.method == "POST":
        files = [f for f in request.files.getlist("files") if f and f.filename]
        if not files:
            flash("Choose at least one markdown file.", "error")
            return render_template("admin/import.html", report=None), 400
        if len(files) > MAX_FILES:
            flash(f"At most {MAX_FILES} files at a time.", "error")
            return render_template("admin/import.html", report=None), 400
        category = (request.form.get("category") or "").strip() or None
        report = import_markdown_files(db(), runtime().embedder, [(f.filename, f.read()) for f in files],
                                       category=category)
        db().commit()
        flash(f"Import finished: {report.summary()}.", "error" if report.failed else "success")
    return render_template("admin/import.html", report=report)
