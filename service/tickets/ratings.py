"""Customer satisfaction: "How did we do?" once a ticket is solved, and CSAT by agent and by who solved it.

The customer proves it is their ticket with its secret (the page's cookie, or X-Ticket-Secret) or with the
ticket's reply token, which only the e-mails sent to them carry (the solve e-mail's rating link).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import Ticket, TicketRating, TicketTransition
from service.knowledge.articles import BIGINT_MAX
from service.links import rating_link
from service.mail.compose import new_reply_token
from service.tickets.queries import TicketNotFound
from service.tickets.secrets import secret_matches
from service.tickets.team import display_name
from service.tickets.validation import COMMENT_MAX
from service.validation import ValidationError

RATINGS = ("good", "bad")
RATING_FIELDS = ("rating", "comment")


class RatingNotAllowed(ValueError):
    """The ticket is not solved yet: there is nothing to rate."""


@dataclass(frozen=True)
class Rating:
    """A stored rating."""

    ticket_id: int
    rating: str
    comment: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ticket_id": self.ticket_id, "rating": self.rating, "comment": self.comment}


def clean_rating(fields: dict[str, Any]) -> tuple[bool, str | None]:
    """``rating`` good|bad, ``comment`` optional (at most 2,000 characters)."""
    errors = {name: "unknown field" for name in fields if name not in RATING_FIELDS}
    rating, comment = fields.get("rating"), fields.get("comment")
    if rating not in RATINGS:
        errors["rating"] = "must be good or bad"
    if comment is not None and (not isinstance(comment, str) or len(comment.strip()) > COMMENT_MAX
                                or "\x00" in comment):
        errors["comment"] = f"must be text of at most {COMMENT_MAX} characters"
    if errors:
        raise ValidationError("invalid rating", errors)
    return rating == "good", (comment.strip() or None) if comment else None


def _rated_ticket(session: Session, ticket_id: int, key: str | None, token: str | None) -> Ticket:
    ticket = session.get(Ticket, ticket_id) if 1 <= ticket_id <= BIGINT_MAX else None
    by_token = bool(ticket and token and ticket.reply_token and hmac.compare_digest(token, ticket.reply_token))
    if ticket is None or not (by_token or secret_matches(ticket.secret_sha256, key)):
        raise TicketNotFound(ticket_id)  # a wrong key looks exactly like a missing ticket
    return ticket


def _solver(session: Session, ticket_id: int) -> int | None:
    """The agent whose action last solved the ticket."""
    return session.scalar(sa.select(TicketTransition.actor_user_id).where(
        TicketTransition.ticket_id == ticket_id, TicketTransition.to_state == "solved")
        .order_by(TicketTransition.id.desc()).limit(1))


def rate_ticket(session: Session, ticket_id: int, fields: dict[str, Any], *, key: str | None = None,
                token: str | None = None) -> Rating:
    """Store the customer's rating of a solved ticket; a second one replaces the first."""
    good, comment = clean_rating(fields)
    ticket = _rated_ticket(session, ticket_id, key, token)
    if ticket.state != "solved" and ticket.resolved_at is None:
        raise RatingNotAllowed(ticket_id)
    values = {"good": good, "comment": comment, "solved_by": ticket.solved_by,
              "agent_id": _solver(session, ticket_id), "updated_at": sa.func.clock_timestamp()}
    session.execute(insert(TicketRating).values(ticket_id=ticket_id, **values)
                    .on_conflict_do_update(index_elements=["ticket_id"], set_=values))
    return Rating(ticket_id, "good" if good else "bad", comment)


def current_rating(session: Session, ticket_id: int) -> Rating | None:
    """The ticket's rating, if the customer gave one."""
    row = session.get(TicketRating, ticket_id)
    return Rating(ticket_id, "good" if row.good else "bad", row.comment) if row else None


def rating_invitation(settings: Settings, ticket: Ticket) -> str:
    """The lines the solve e-mail ends with: how to rate (the link carries the ticket's reply token)."""
    if ticket.reply_token is None:
        ticket.reply_token = new_reply_token()
    link = rating_link(settings, ticket.id, ticket.reply_token)
    return f"\n\nHow did we do? Tell us (good or bad, and a comment if you like):\n{link}"


@dataclass(frozen=True)
class CsatRow:
    """Ratings for one group: good, bad, and the share that is good."""

    label: str
    good: int
    bad: int

    @property
    def score(self) -> float | None:
        """Good ratings per rating (None without ratings)."""
        return self.good / (self.good + self.bad) if self.good + self.bad else None


CSAT_BY_AGENT_SQL = sa.text("""
SELECT u.username, u.display_name, count(*) FILTER (WHERE r.good) AS good, count(*) FILTER (WHERE NOT r.good) AS bad
FROM ticket_ratings r JOIN admin_users u ON u.id = r.agent_id
WHERE r.updated_at >= now() - make_interval(days => :days) AND r.solved_by = 'agent'
GROUP BY u.username, u.display_name ORDER BY u.username
""")
# AI-only: the customer marked the AI's answer solved and no agent ever replied; agent-solved: an agent solved it.
CSAT_BY_SOLVER_SQL = sa.text("""
SELECT CASE WHEN r.solved_by = 'agent' THEN 'agent' ELSE 'ai' END AS solver,
       count(*) FILTER (WHERE r.good) AS good, count(*) FILTER (WHERE NOT r.good) AS bad
FROM ticket_ratings r
WHERE r.updated_at >= now() - make_interval(days => :days)
  AND (r.solved_by = 'agent' OR NOT EXISTS (
      SELECT 1 FROM ticket_messages m WHERE m.ticket_id = r.ticket_id AND m.kind = 'agent_reply'))
GROUP BY 1
""")


def csat_report(session: Session, *, days: int) -> dict[str, list[CsatRow]]:
    """``by_agent`` (display name, or username) and ``by_solver`` (AI-only, agent-solved) for the period."""
    by_agent = [CsatRow(f"{display_name(r.display_name)} ({r.username})", r.good, r.bad)
                for r in session.execute(CSAT_BY_AGENT_SQL, {"days": days})]
    solvers = {r.solver: r for r in session.execute(CSAT_BY_SOLVER_SQL, {"days": days})}
    by_solver = [CsatRow(label, solvers[key].good if key in solvers else 0, solvers[key].bad if key in solvers else 0)
                 for key, label in (("ai", "AI only"), ("agent", "Solved by an agent"))]
    return {"by_agent": by_agent, "by_solver": by_solver}
