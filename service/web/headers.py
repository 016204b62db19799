"""Security headers on every response: a strict CSP (the admin pages load only their own files), no sniffing,
no framing, no referrer leaking ticket or article URLs."""

from __future__ import annotations

from flask import Response, request

from service.web.errors import is_page

ADMIN_CSP = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"
# JSON needs no content at all; a browser rendering an API response by mistake runs nothing.
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"


def add_security_headers(response: Response) -> Response:
    """After every request; a view that set its own CSP (the API docs page) keeps it."""
    page = is_page(request.path)
    headers = response.headers
    headers.setdefault("Content-Security-Policy", ADMIN_CSP if page else API_CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    if "frame-ancestors 'none'" in headers["Content-Security-Policy"]:  # the widget's frame lists its sites
        headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin" if page else "no-referrer")
    if page:
        headers.setdefault("Cache-Control", "no-store")  # pages show customer data behind a login
    return response
