"""The names known to tickets, for scrubbing what others see of them: the customer's (the ``From:`` display name
of their e-mails, the words of their address) and every agent's display name."""

from __future__ import annotations

import re
from email.parser import BytesHeaderParser
from email.policy import default as default_policy

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AdminUser, InboundEmail, Ticket

HEADER_BYTES = 16384  # the From header is near the top; never read a large message whole for it
_PARSER = BytesHeaderParser(policy=default_policy)


def _display_name(raw: bytes) -> str | None:
    """The From display name of a stored message, None when it has none or cannot be read."""
    try:
        sender = _PARSER.parsebytes(raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0])["From"]
        addresses = getattr(sender, "addresses", ()) if sender is not None else ()
        return addresses[0].display_name or None if addresses else None
    except Exception:  # noqa: BLE001 - a header the parser chokes on has no name we can use
        return None


def _address_words(address: str | None) -> list[str]:
    """``maria.lopez@example.com`` → ``Maria Lopez``: a local part made of name-like words."""
    local = (address or "").partition("@")[0]
    words = [word for word in re.split(r"[._+-]+", local) if word.isalpha() and len(word) >= 3]
    return [" ".join(words)] if words else []


def agent_names(session: Session) -> list[str]:
    """Every agent's display name."""
    return [name for name in session.scalars(sa.select(AdminUser.display_name)
                                             .where(AdminUser.display_name.is_not(None))) if name.strip()]


def known_names(session: Session, ticket_ids: list[int]) -> dict[int, list[str]]:
    """For each ticket: its customer's names and every agent's display name (two statements for all)."""
    agents = agent_names(session)
    found: dict[int, list[str]] = {ticket_id: [*agents] for ticket_id in ticket_ids}
    for ticket_id, address in session.execute(sa.select(Ticket.id, Ticket.customer_email)
                                              .where(Ticket.id.in_(ticket_ids))):
        found[ticket_id] += _address_words(address)
    rows = session.execute(sa.select(InboundEmail.ticket_id, sa.func.substring(InboundEmail.raw, 1, HEADER_BYTES))
                           .where(InboundEmail.ticket_id.in_(ticket_ids)))
    for ticket_id, head in rows:
        name = _display_name(bytes(head)) if head is not None else None
        if name:
            found[ticket_id].append(name)
    return found
