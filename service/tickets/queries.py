"""Reading tickets back: one ticket with its answer and citations, lists, feedback, the gap report."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import TICKET_STATUSES, AnswerFeedback, Ticket, TicketAnswer, TicketCitation
from service.knowledge.articles import BIGINT_MAX
from service.tickets.secrets import secret_matches
from service.tickets.validation import clean_feedback_fields
from service.validation import ValidationError


class TicketNotFound(LookupError):
    """No ticket with that id."""


class FeedbackNotAllowed(PermissionError):
    """Feedback from someone who is neither the ticket's submitter (its secret) nor an admin."""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# What an anonymous submitter is shown of a ticket (admins see every field).
PUBLIC_TICKET_FIELDS = ("id", "subject", "body", "email", "status", "created_at", "answered_at", "answer", "mode",
                        "citations", "feedback")
PUBLIC_CITATION_FIELDS = ("article_id", "title", "rank", "cited", "section")


@dataclass(frozen=True)
class TicketView:
    """A ticket with its latest answer, the retrieved articles and feedback."""

    id: int
    subject: str
    body: str
    email: str | None
    status: str
    state: str | None  # the work state for agents: open, pending, solved, or None (no person needed)
    created_at: datetime
    answered_at: datetime | None
    answer: str | None
    mode: str | None
    reason: str | None
    model: str | None
    error: str | None
    timings: dict[str, float | None]
    tokens: dict[str, int | None]
    gate: dict[str, Any] | None
    citations: list[dict[str, Any]]
    feedback: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for admins: everything, the error text and gate internals included)."""
        data = asdict(self)
        data["created_at"], data["answered_at"] = _iso(self.created_at), _iso(self.answered_at)
        return data

    def to_public_dict(self) -> dict[str, Any]:
        """What the anonymous submitter sees: the answer and its sources, no exception text, SQL, model name,
        scores or gate internals."""
        data = {name: value for name, value in self.to_dict().items() if name in PUBLIC_TICKET_FIELDS}
        data["citations"] = [{name: c[name] for name in PUBLIC_CITATION_FIELDS} for c in self.citations]
        data["feedback"] = [{"helpful": f["helpful"], "comment": f["comment"]} for f in self.feedback]
        return data



def _citation_dict(c: TicketCitation) -> dict[str, Any]:
    return {"article_id": c.article_id, "title": c.article_title, "rank": c.rank, "cited": c.cited,
            "similarity": c.similarity, "recency": c.recency, "importance": c.importance, "score": c.score,
            "section": c.section_label, "section_similarity": c.section_similarity,
            "article_version": c.article_version}  # the text it quoted: /api/articles/<id>/versions/<n>


def ticket_views(session: Session, tickets: list[Ticket]) -> list[TicketView]:
    """Build views for many tickets with one query per table (no N+1)."""
    ids = [t.id for t in tickets]
    answers: dict[int, TicketAnswer] = {}
    for answer in session.scalars(sa.select(TicketAnswer).where(TicketAnswer.ticket_id.in_(ids))
                                  .order_by(TicketAnswer.id)):
        answers[answer.ticket_id] = answer  # the latest wins
    citations: dict[int, list[dict]] = {i: [] for i in ids}
    for c in session.scalars(sa.select(TicketCitation).where(TicketCitation.ticket_id.in_(ids))
                             .order_by(TicketCitation.ticket_id, TicketCitation.rank)):
        citations[c.ticket_id].append(_citation_dict(c))
    feedback: dict[int, list[dict]] = {i: [] for i in ids}
    for f in session.scalars(sa.select(AnswerFeedback).where(AnswerFeedback.ticket_id.in_(ids))
                             .order_by(AnswerFeedback.id)):
        feedback[f.ticket_id].append({"helpful": f.helpful, "comment": f.comment, "created_at": _iso(f.created_at)})
    views = []
    for t in tickets:
        a = answers.get(t.id)
        views.append(TicketView(
            id=t.id, subject=t.subject, body=t.body, email=t.customer_email, status=t.status, state=t.state,
            created_at=t.created_at, answered_at=t.answered_at,
            answer=a.answer if a else None, mode=a.mode if a else None, reason=a.reason if a else None,
            model=a.model if a else None, error=a.error if a else None,
            timings={"retrieval_ms": a.retrieval_ms if a else None, "llm_ms": a.llm_ms if a else None,
                     "total_ms": a.latency_ms if a else None},
            tokens={"prompt": a.prompt_tokens if a else None, "completion": a.completion_tokens if a else None},
            gate=t.gate, citations=citations[t.id], feedback=feedback[t.id],
        ))
    return views


def get_ticket(session: Session, ticket_id: int) -> TicketView:
    """One ticket, or TicketNotFound."""
    ticket = session.get(Ticket, ticket_id) if 1 <= ticket_id <= BIGINT_MAX else None
    if ticket is None:
        raise TicketNotFound(ticket_id)
    return ticket_views(session, [ticket])[0]


def list_tickets(session: Session, *, status: str | None = None, article_id: int | None = None,
                 page: int = 1, per_page: int = 20) -> tuple[list[TicketView], int]:
    """Newest first, optionally only one status or only tickets that retrieved an article."""
    if status is not None and status not in TICKET_STATUSES:
        raise ValidationError("invalid filter", {"status": f"must be one of {', '.join(TICKET_STATUSES)}"})
    where = []
    if status:
        where.append(Ticket.status == status)
    if article_id is not None:
        where.append(Ticket.id.in_(sa.select(TicketCitation.ticket_id).where(TicketCitation.article_id == article_id)))
    total = session.execute(sa.select(sa.func.count()).select_from(Ticket).where(*where)).scalar_one()
    tickets = list(session.scalars(sa.select(Ticket).where(*where).order_by(Ticket.id.desc())
                                   .offset((page - 1) * per_page).limit(per_page)))
    return ticket_views(session, tickets), total


def add_feedback(session: Session, ticket_id: int, fields: dict[str, Any], *, secret: str | None = None,
                 trusted: bool = False) -> dict[str, Any]:
    """Record whether an answer helped: from an admin (``trusted``) or whoever holds the ticket's ``secret``."""
    cleaned = clean_feedback_fields(fields)
    ticket = session.get(Ticket, ticket_id) if 1 <= ticket_id <= BIGINT_MAX else None
    if ticket is None:
        raise TicketNotFound(ticket_id)
    if not trusted and not secret_matches(ticket.secret_sha256, secret):
        raise FeedbackNotAllowed(ticket_id)
    feedback = AnswerFeedback(ticket_id=ticket_id, **cleaned)
    session.add(feedback)
    session.flush()
    session.refresh(feedback, ["created_at"])
    return {"ticket_id": ticket_id, "helpful": feedback.helpful, "comment": feedback.comment,
            "created_at": _iso(feedback.created_at)}


GAPS_SQL = sa.text("""
WITH troubled AS (
    SELECT t.id, t.subject, t.status, t.created_at, t.erased_at IS NOT NULL AS erased,
           coalesce((t.gate ->> 'answerable')::boolean, true) AS matched,
           EXISTS (SELECT 1 FROM answer_feedback f WHERE f.ticket_id = t.id AND NOT f.helpful) AS unhelpful
    FROM tickets t
    WHERE t.created_at >= now() - make_interval(days => :days)
      AND (t.status = 'needs_agent'
           OR EXISTS (SELECT 1 FROM answer_feedback f WHERE f.ticket_id = t.id AND NOT f.helpful))
),
nearest AS (
    SELECT tr.*, c.article_id, c.article_title, c.similarity, kb.category
    FROM troubled tr
    LEFT JOIN ticket_citations c ON c.ticket_id = tr.id AND c.rank = 1 AND tr.matched  -- under the gate: no match
    LEFT JOIN knowledge_base kb ON kb.id = c.article_id
)
SELECT article_id, article_title, category,
       count(*) AS tickets,
       count(*) FILTER (WHERE status = 'needs_agent') AS needs_agent,
       count(*) FILTER (WHERE unhelpful) AS not_helpful,
       avg(similarity) AS mean_similarity,
       coalesce((array_agg(subject ORDER BY created_at DESC) FILTER (WHERE NOT erased))[1:5], '{}') AS examples
FROM nearest
GROUP BY article_id, article_title, category
ORDER BY tickets DESC, article_title NULLS LAST
LIMIT :limit
""")


NO_MATCHING_ARTICLE = "no matching article"


def content_gaps(session: Session, *, days: int = 30, limit: int = 20) -> list[dict[str, Any]]:
    """Recent tickets handed off or marked unhelpful, grouped by their nearest article; a ticket no article
    cleared the answer gate for is filed under "no matching article" (``nearest_article`` null), not the nearest.
    An erased ticket still counts (aggregates stay) but is never an example: its question is gone."""
    rows = session.execute(GAPS_SQL, {"days": days, "limit": limit}).mappings()
    return [
        {"nearest_article": {"id": r["article_id"], "title": r["article_title"], "category": r["category"]}
         if r["article_title"] else None,
         "label": r["article_title"] or NO_MATCHING_ARTICLE,
         "tickets": r["tickets"], "needs_agent": r["needs_agent"], "not_helpful": r["not_helpful"],
         "mean_similarity": float(r["mean_similarity"]) if r["mean_similarity"] is not None else None,
         "examples": list(r["examples"] or [])}
        for r in rows
    ]
