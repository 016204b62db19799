"""Absolute links for e-mails and drafts: SUPPORTRAG_PUBLIC_URL when set, else the request's own host."""

from __future__ import annotations

from flask import url_for

from service.web.help.markdown import section_anchor
from service.web.requests import runtime


def public_url(endpoint: str, **values) -> str:
    """An absolute URL to a public page (the customer may be reading an e-mail far from this server)."""
    base = runtime().settings.public_url
    if base:
        return base + url_for(endpoint, **values)
    return url_for(endpoint, _external=True, **values)


def article_link(article_id: int, section: str | None) -> str:
    """The public article page, at the section's heading."""
    return public_url("help.article", article_id=article_id, _anchor=section_anchor(section))


def ticket_link(ticket_id: int, key: str) -> str:
    """The customer's ticket page (the secret link)."""
    return public_url("help.ticket", ticket_id=ticket_id, key=key)
