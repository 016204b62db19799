"""Which ticket an e-mail answers, and whether its sender may add to it.

A message names a ticket by the reply token in a recipient address (MAIL_REPLY_TO's plus-address), by
In-Reply-To/References (stored Message-IDs), or by "[T-12]" in its subject. Any of these can be copied by a
stranger, so the follow-up is accepted only from an address already on the ticket: its customer's, or the From
or Cc of an e-mail accepted on it before (compared as case-folded addr-specs). Anyone else gets a ticket of
their own, linked to the one they named.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import InboundEmail, MailOutbox, Ticket, TicketMessage
from service.intake.parse import InboundMail
from service.mail.compose import token_from_address


@dataclass(frozen=True)
class Match:
    """The ticket a message named (and how), and whether its sender is on that ticket."""

    ticket_id: int | None
    how: str = ""
    sender_on_ticket: bool = False

    @property
    def follow_up(self) -> bool:
        """Whether the message joins the named ticket's thread."""
        return self.ticket_id is not None and self.sender_on_ticket


def _by_token(session: Session, settings: Settings, mail: InboundMail) -> int | None:
    for address in mail.recipients:
        token = token_from_address(settings, address)
        if token:
            ticket_id = session.scalar(sa.select(Ticket.id).where(Ticket.reply_token == token))
            if ticket_id is not None:
                return ticket_id
    return None


def _by_thread(session: Session, mail: InboundMail) -> int | None:
    if not mail.thread_ids:
        return None
    return session.scalar(sa.union_all(
        sa.select(TicketMessage.ticket_id.label("tid")).where(TicketMessage.email_message_id.in_(mail.thread_ids)),
        sa.select(MailOutbox.ticket_id).where(MailOutbox.message_id.in_(mail.thread_ids),
                                              MailOutbox.ticket_id.is_not(None)),
    ).limit(1))


def _by_subject(session: Session, mail: InboundMail) -> int | None:
    if not mail.ticket_references:
        return None
    return session.scalar(sa.select(Ticket.id).where(Ticket.id.in_(mail.ticket_references)).order_by(Ticket.id)
                          .limit(1))


def ticket_addresses(session: Session, ticket_id: int) -> set[str]:
    """Case-folded addresses on the ticket: its customer's, and the From and Cc of e-mails accepted on it."""
    found = {session.scalar(sa.select(Ticket.customer_email).where(Ticket.id == ticket_id)) or ""}
    rows = session.execute(sa.select(InboundEmail.sender, InboundEmail.cc).where(
        InboundEmail.ticket_id == ticket_id, InboundEmail.status == "processed",
        InboundEmail.related_ticket_id.is_(None))).all()
    for sender, cc in rows:
        found |= {sender or "", *(cc or [])}
    return {address.strip().casefold() for address in found if address.strip()}


def match_ticket(session: Session, settings: Settings, mail: InboundMail) -> Match:
    """The ticket named by token, then thread, then subject reference; with the sender check."""
    for how, find in (("reply token", lambda: _by_token(session, settings, mail)),
                      ("In-Reply-To/References", lambda: _by_thread(session, mail)),
                      ("subject reference", lambda: _by_subject(session, mail))):
        ticket_id = find()
        if ticket_id is not None:
            sender = (mail.sender or "").strip().casefold()
            return Match(ticket_id, how, bool(sender) and sender in ticket_addresses(session, ticket_id))
    return Match(None)
