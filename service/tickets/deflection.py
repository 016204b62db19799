"""Deflection: how many questions the help page answered, solved, escalated or handed off, per day and category.

A ticket's category is the category of the article it retrieved first (its nearest article), or "No matching
article" when no article cleared the answer gate for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.tickets.answering import HANDOFF_MESSAGE

UNCATEGORISED = "Uncategorised"
NO_MATCHING_ARTICLE = "No matching article"  # no article cleared the answer gate: not the nearest one's category

# One statement, three groupings: per day, per category, and the total (GROUPING tells them apart).
OUTCOMES_SQL = sa.text("""
WITH recent AS (
    SELECT t.id, (t.created_at AT TIME ZONE 'UTC')::date AS day,
           CASE WHEN coalesce((t.gate ->> 'answerable')::boolean, true)
                THEN coalesce(kb.category, :uncategorised) ELSE :no_match END AS category,
           t.resolved_at IS NOT NULL AS solved,
           t.escalated_at IS NOT NULL AS escalated,
           latest.answer IS NOT NULL AND latest.answer <> :handoff AS answered,
           latest.answer IS NOT NULL AND latest.answer = :handoff AS handed_off
    FROM tickets t
    LEFT JOIN LATERAL (SELECT a.answer FROM ticket_answers a WHERE a.ticket_id = t.id
                       ORDER BY a.id DESC LIMIT 1) latest ON true
    LEFT JOIN ticket_citations c ON c.ticket_id = t.id AND c.rank = 1
    LEFT JOIN knowledge_base kb ON kb.id = c.article_id
    WHERE t.created_at >= CAST(:since AS timestamp) AT TIME ZONE 'UTC'
)
SELECT GROUPING(day) AS no_day, GROUPING(category) AS no_category, day, category,
       count(*) AS asked,
       count(*) FILTER (WHERE answered) AS answered,
       count(*) FILTER (WHERE solved) AS solved,
       count(*) FILTER (WHERE escalated) AS escalated,
       count(*) FILTER (WHERE handed_off) AS handed_off,
       count(*) FILTER (WHERE handed_off AND NOT escalated AND NOT solved) AS handed_off_waiting
FROM recent
GROUP BY GROUPING SETS ((day), (category), ())
ORDER BY day NULLS LAST, category NULLS LAST
""")

CITED_SQL = sa.text("""
SELECT c.article_id, min(c.article_title) AS title,
       count(*) FILTER (WHERE t.resolved_at IS NOT NULL) AS solved,
       count(*) FILTER (WHERE t.escalated_at IS NOT NULL) AS escalated
FROM ticket_citations c
JOIN tickets t ON t.id = c.ticket_id
WHERE c.cited AND t.created_at >= CAST(:since AS timestamp) AT TIME ZONE 'UTC' AND (t.resolved_at IS NOT NULL OR t.escalated_at IS NOT NULL)
GROUP BY c.article_id
ORDER BY count(*) DESC, min(c.article_title)
LIMIT :limit
""")


@dataclass(frozen=True)
class Outcomes:
    """Counts of what happened to the questions in one group."""

    asked: int = 0
    answered: int = 0  # the AI gave an answer (not the hand-off message)
    solved: int = 0  # the customer said the answer solved it
    escalated: int = 0  # the customer sent it to an agent
    handed_off: int = 0  # the gate (or the model, or a failure) gave the hand-off message
    handed_off_waiting: int = 0  # handed off, and the customer left no email (yet)

    @property
    def deflection_rate(self) -> float | None:
        """Questions the customer marked solved without an agent, per question asked."""
        return self.solved / self.asked if self.asked else None

    @property
    def open(self) -> int:
        """Answered, and the customer has not said whether it helped."""
        return max(self.asked - self.solved - self.escalated - self.handed_off_waiting, 0)


@dataclass(frozen=True)
class CitedArticle:
    """An article cited in answers the customer marked solved or escalated."""

    article_id: int | None
    title: str
    solved: int
    escalated: int


@dataclass(frozen=True)
class DeflectionReport:
    """The dashboard's numbers for the last ``days`` days (today included, UTC)."""

    days: int
    since: date
    total: Outcomes
    by_day: list[tuple[date, Outcomes]]  # every day, zeros included, oldest first
    by_category: list[tuple[str, Outcomes]]
    articles: list[CitedArticle]


def _outcomes(row) -> Outcomes:
    return Outcomes(asked=row.asked, answered=row.answered, solved=row.solved, escalated=row.escalated,
                    handed_off=row.handed_off, handed_off_waiting=row.handed_off_waiting)


def deflection_report(session: Session, *, days: int = 14, today: date | None = None,
                      article_limit: int = 10) -> DeflectionReport:
    """Outcomes per day and per category, the total, and the articles cited in solved vs escalated answers."""
    today = today or session.execute(sa.text("SELECT (now() AT TIME ZONE 'UTC')::date")).scalar_one()
    since = today - timedelta(days=days - 1)
    rows = session.execute(OUTCOMES_SQL, {"since": since, "handoff": HANDOFF_MESSAGE,
                                          "uncategorised": UNCATEGORISED, "no_match": NO_MATCHING_ARTICLE}).all()
    per_day = {row.day: _outcomes(row) for row in rows if not row.no_day}
    total = next((_outcomes(row) for row in rows if row.no_day and row.no_category), Outcomes())
    by_category = sorted(((row.category, _outcomes(row)) for row in rows if not row.no_category),
                         key=lambda item: (-item[1].asked, item[0]))
    articles = [CitedArticle(row.article_id, row.title, row.solved, row.escalated)
                for row in session.execute(CITED_SQL, {"since": since, "limit": article_limit})]
    by_day = [(day, per_day.get(day, Outcomes())) for day in (since + timedelta(n) for n in range(days))]
    return DeflectionReport(days=days, since=since, total=total, by_day=by_day, by_category=by_category,
                            articles=articles)
