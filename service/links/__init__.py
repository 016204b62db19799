"""Signed absolute links to a customer's ticket (one builder for web, CLI, IMAP and mail); imports service.config only."""

from service.links.signed import (
    LINK_PARAMETER,
    base_url,
    rating_link,
    ticket_link,
    verify_ticket_link,
)

__all__ = ["LINK_PARAMETER", "base_url", "rating_link", "ticket_link", "verify_ticket_link"]
