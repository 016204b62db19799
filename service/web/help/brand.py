"""The help center's branding (SUPPORTRAG_BRAND_*): the brand in every help template, its accent colour as a style
sheet (the pages' CSP refuses inline styles) and its logo file."""

from __future__ import annotations

from flask import Blueprint, Flask, Response, abort, send_file

from service.web.requests import runtime

help_brand = Blueprint("help_brand", __name__, url_prefix="/help/brand")
LOGO_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
              ".webp": "image/webp", ".svg": "image/svg+xml"}


def brand_context() -> dict:
    """``brand`` for the templates (service.config.Brand)."""
    return {"brand": runtime().settings.brand}


@help_brand.get("/style.css", endpoint="style")
def style():
    """The accent colour over admin.css's ``--accent`` (the colour was checked as hex when settings were read)."""
    color = runtime().settings.brand.color
    css = f":root {{ --accent: {color}; }}\n.help .topbar {{ background: {color}; }}\n" if color else ""
    return Response(css, mimetype="text/css", headers={"Cache-Control": "public, max-age=300"})


@help_brand.get("/logo", endpoint="logo")
def logo():
    """The logo file; 404 when none is set or it cannot be read. An SVG is sandboxed: it may not run script."""
    path = runtime().settings.brand.logo
    if path is None or path.suffix.lower() not in LOGO_TYPES or not path.is_file():
        abort(404)
    response = send_file(path, mimetype=LOGO_TYPES[path.suffix.lower()], max_age=300)
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    return response


def register_brand(app: Flask) -> None:
    """The brand routes, and ``brand`` in every template (the help pages and e-mail previews use it)."""
    app.register_blueprint(help_brand)
    app.context_processor(brand_context)
