"""E-mail notifications to agents, queued in the outbox with the change that causes them (same transaction).

- A customer writes on a ticket (help page or e-mail): its assignee is told, if they have an e-mail address and
  want notifications; an unassigned ticket is back in the queue, so the team is told instead.
- A ticket is escalated and nobody has it: the team address (NOTIFY_TEAM_ADDRESS) or, without one, every agent
  with an address who wants notifications.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import AdminUser, Ticket
from service.links import base_url
from service.mail.outbox import enqueue_notification

EXCERPT_CHARS = 600


def workspace_link(settings: Settings, ticket_id: int) -> str:
    """The agent's workspace for the ticket (absolute with SUPPORTRAG_PUBLIC_URL)."""
    return f"{base_url(settings)}/admin/inbox/{ticket_id}"


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + " …"


def _team_addresses(session: Session, settings: Settings) -> list[str]:
    if settings.notify_team_address:
        return [settings.notify_team_address]
    return list(session.scalars(sa.select(AdminUser.email).where(
        AdminUser.email.is_not(None), AdminUser.notify_by_email.is_(True)).order_by(AdminUser.id)))


def notify_customer_reply(session: Session, settings: Settings, ticket: Ticket, text: str) -> int:
    """The customer wrote ``text`` on ``ticket``: tell its assignee (or the team when unassigned); how many queued."""
    if ticket.assignee_id is None:
        return notify_unassigned(session, settings, ticket, why="The customer wrote again")
    assignee = session.get(AdminUser, ticket.assignee_id)
    if assignee is None or not assignee.email or not assignee.notify_by_email:
        return 0
    body = (f"The customer replied on T-{ticket.id} ({ticket.subject}), which is assigned to you:\n\n"
            f"{_excerpt(text)}\n\nOpen it: {workspace_link(settings, ticket.id)}\n\n"
            "You get this because e-mail notifications are on in your settings (/admin/settings).")
    row = enqueue_notification(session, settings, to_address=assignee.email,
                               subject=f"[T-{ticket.id}] Customer replied: {ticket.subject}", body=body)
    return int(row is not None)


def notify_unassigned(session: Session, settings: Settings, ticket: Ticket, *, why: str = "Escalated") -> int:
    """An open ticket that nobody has: tell the team; how many e-mails were queued."""
    if ticket.assignee_id is not None or ticket.state != "open" or not settings.smtp_host:
        return 0
    body = (f"{why}, and nobody has it yet: T-{ticket.id} ({ticket.subject}).\n\n{_excerpt(ticket.body)}\n\n"
            f"Take it: {workspace_link(settings, ticket.id)}\n\n"
            "Agents can switch these e-mails off in their settings (/admin/settings).")
    queued = 0
    for address in _team_addresses(session, settings):
        queued += enqueue_notification(session, settings, to_address=address, body=body,
                                       subject=f"[T-{ticket.id}] Needs an agent: {ticket.subject}") is not None
    return queued
