"""Absolute links for e-mails and drafts: always from SUPPORTRAG_PUBLIC_URL (else host:port), never the request's
Host header, which a client chooses. Ticket links are service.links's signed ones."""

from __future__ import annotations

from flask import request, url_for

from service.links import base_url, ticket_link as signed_ticket_link
from service.web.help.markdown import section_anchor
from service.web.requests import runtime


def public_url(endpoint: str, **values) -> str:
    """An absolute URL to a public page (the customer may be reading an e-mail far from this server)."""
    return base_url(runtime().settings) + url_for(endpoint, **values)


def article_link(article_id: int, section: str | None) -> str:
    """The public article page, at the section's heading."""
    return public_url("help.article", article_id=article_id, _anchor=section_anchor(section))


def article_link_for_this_page(article_id: int, section: str | None) -> str:
    """The article page for a response read at once by the requester (the chat widget's citations):
    SUPPORTRAG_PUBLIC_URL when set, else the origin the requester used, which only they see. Never for e-mail."""
    if runtime().settings.public_url:
        return article_link(article_id, section)
    return request.host_url.rstrip("/") + url_for("help.article", article_id=article_id,
                                                   _anchor=section_anchor(section))


def ticket_link(ticket_id: int, _secret: str | None = None) -> str:
    """The customer's ticket page, signed (the intake adapters' ``ticket_link(ticket_id, secret)`` shape)."""
    return signed_ticket_link(runtime().settings, ticket_id)
