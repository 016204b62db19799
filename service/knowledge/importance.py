"""Importance proposals from outcomes: count them, apply the rule, store proposals, apply or dismiss them.

Use cases take a session and never commit. Nothing here changes an importance except ``apply_proposal``,
which goes through the article update (and so the audit log).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import DRAFT_REPLACED_AT, Article, ImportanceProposal
from service.knowledge.articles import BIGINT_MAX, update_article
from service.knowledge.versions import ChangeContext
from service.knowledge.audit import ImportanceCause
from service.knowledge.importance_rule import OutcomeCounts, RuleSettings, mean_solve_rate, propose_importance
from service.providers.embeddings import Embedder

EVIDENCE_QUESTIONS = 5

# Per ticket in the window, one outcome: escalated beats solved (escalating clears it); otherwise the latest
# API feedback decides. Per article, the tickets whose answer cited it, by outcome, and the latest questions (an
# erased ticket's outcome still counts, its question is not shown).
OUTCOMES_SQL = sa.text("""
WITH outcome AS (
    SELECT t.id, t.subject, t.created_at, t.erased_at IS NOT NULL AS erased,
           CASE WHEN t.escalated_at IS NOT NULL THEN 'escalated'
                WHEN t.resolved_at IS NOT NULL THEN 'solved'
                WHEN latest.helpful THEN 'solved'
                WHEN NOT latest.helpful THEN 'not_helpful' END AS outcome
    FROM tickets t
    LEFT JOIN LATERAL (SELECT f.helpful FROM answer_feedback f WHERE f.ticket_id = t.id
                       ORDER BY f.created_at DESC, f.id DESC LIMIT 1) latest ON true
    WHERE t.created_at >= now() - make_interval(days => :days)
),
cited AS (
    SELECT DISTINCT c.article_id, o.id, o.subject, o.created_at, o.outcome, o.erased
    FROM ticket_citations c JOIN outcome o ON o.id = c.ticket_id
    WHERE c.cited AND c.article_id IS NOT NULL AND o.outcome IS NOT NULL
)
SELECT article_id,
       count(*) FILTER (WHERE outcome = 'solved') AS solved,
       count(*) FILTER (WHERE outcome = 'escalated') AS escalated,
       count(*) FILTER (WHERE outcome = 'not_helpful') AS not_helpful,
       (array_agg(jsonb_build_object('ticket_id', id, 'question', subject, 'outcome', outcome)
                  ORDER BY created_at DESC, id DESC) FILTER (WHERE NOT erased))[1:5] AS questions
FROM cited
GROUP BY article_id
""")


# Replies that started from an AI draft, counted once per cited article (the draft's citations).
DRAFT_OUTCOMES_SQL = sa.text("""
SELECT cited.article_id,
       count(*) FILTER (WHERE m.edit_ratio = 0) AS unchanged,
       count(*) FILTER (WHERE m.edit_ratio >= :replaced_at) AS replaced
FROM ticket_messages m
CROSS JOIN LATERAL (SELECT DISTINCT unnest(m.draft_article_ids) AS article_id) cited
WHERE m.kind = 'agent_reply' AND m.edit_ratio IS NOT NULL
  AND m.created_at >= now() - make_interval(days => :days)
GROUP BY cited.article_id
""")


class ProposalNotFound(LookupError):
    """No importance proposal with that id."""


class ProposalConflict(ValueError):
    """The proposal is no longer pending, or the article's importance changed since it was made."""


@dataclass(frozen=True)
class ProposalView:
    """A proposal as the API and the admin page show it."""

    id: int
    article_id: int
    article_title: str
    status: str
    current_importance: float
    proposed_importance: float
    evidence: dict[str, Any]
    created_at: datetime
    decided_at: datetime | None
    decided_by: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "article_id": self.article_id, "article_title": self.article_title,
                "status": self.status, "current_importance": self.current_importance,
                "proposed_importance": self.proposed_importance, "evidence": self.evidence,
                "created_at": self.created_at.isoformat(),
                "decided_at": self.decided_at.isoformat() if self.decided_at else None, "decided_by": self.decided_by}


def draft_outcomes(session: Session, days: int) -> dict[int, tuple[int, int]]:
    """Per article, agent replies over the window whose AI draft cited it: sent unchanged, and replaced."""
    rows = session.execute(DRAFT_OUTCOMES_SQL, {"days": days, "replaced_at": DRAFT_REPLACED_AT})
    return {row.article_id: (row.unchanged, row.replaced) for row in rows}


def outcome_counts(session: Session, days: int) -> tuple[dict[int, OutcomeCounts], dict[int, list[dict]]]:
    """Per cited article over the last ``days`` days: its outcome counts, and its latest questions."""
    drafts = draft_outcomes(session, days)
    counts, questions = {}, {}
    for row in session.execute(OUTCOMES_SQL, {"days": days}):
        unchanged, replaced = drafts.get(row.article_id, (0, 0))
        counts[row.article_id] = OutcomeCounts(row.solved, row.escalated, row.not_helpful, unchanged, replaced)
        questions[row.article_id] = list(row.questions)
    for article_id, (unchanged, replaced) in drafts.items():
        counts.setdefault(article_id, OutcomeCounts(drafts_unchanged=unchanged, drafts_replaced=replaced))
    return counts, questions


def _evidence(counts: OutcomeCounts, decision, questions: list[dict], settings: Settings) -> dict[str, Any]:
    return {"window_days": settings.importance_window_days, "solved": counts.solved, "escalated": counts.escalated,
            "not_helpful": counts.not_helpful, "drafts_unchanged": counts.drafts_unchanged,
            "drafts_replaced": counts.drafts_replaced, **decision.to_dict(),
            "min_outcomes": settings.importance_min_outcomes, "max_step": settings.importance_max_step,
            "questions": questions}


def refresh_proposals(session: Session, settings: Settings) -> list[ProposalView]:
    """Recount the window and store a pending proposal for each article the rule moves; returns the pending ones.

    A pending proposal whose numbers still hold keeps its id (its evidence is refreshed); one the rule no longer
    makes is marked ``superseded``.
    """
    counts, questions = outcome_counts(session, settings.importance_window_days)
    mean = mean_solve_rate(list(counts.values()))
    rule = RuleSettings(settings.importance_min_outcomes, settings.importance_max_step)
    current = dict(session.execute(sa.select(Article.id, Article.importance).where(Article.id.in_(list(counts)))).all())
    pending = {p.article_id: p for p in session.scalars(
        sa.select(ImportanceProposal).where(ImportanceProposal.status == "pending").with_for_update())}
    for article_id, importance in current.items():
        decision = propose_importance(counts[article_id], importance, mean, rule)
        existing = pending.pop(article_id, None)
        if decision.proposed_importance is None:
            if existing is not None:
                pending[article_id] = existing  # superseded below
            continue
        evidence = _evidence(counts[article_id], decision, questions.get(article_id, []), settings)
        if existing is not None and (existing.current_importance, existing.proposed_importance) == (
                importance, decision.proposed_importance):
            existing.evidence = evidence
            continue
        if existing is not None:
            _decide(existing, "superseded", None)
            session.flush()  # one pending proposal per article
        session.add(ImportanceProposal(article_id=article_id, current_importance=importance,
                                       proposed_importance=decision.proposed_importance, evidence=evidence))
    for stale in pending.values():
        _decide(stale, "superseded", None)
    session.flush()
    return list_proposals(session)


def _decide(proposal: ImportanceProposal, status: str, actor: str | None) -> None:
    proposal.status, proposal.decided_at, proposal.decided_by = status, sa.func.clock_timestamp(), actor


def list_proposals(session: Session, *, status: str | None = "pending") -> list[ProposalView]:
    """Proposals (pending by default), largest move first."""
    query = sa.select(ImportanceProposal, Article.title).join(Article, Article.id == ImportanceProposal.article_id)
    if status is not None:
        query = query.where(ImportanceProposal.status == status)
    query = query.order_by(sa.func.abs(ImportanceProposal.proposed_importance - ImportanceProposal.current_importance)
                           .desc(), ImportanceProposal.id)
    return [_view(p, title) for p, title in session.execute(query)]


def _view(p: ImportanceProposal, title: str) -> ProposalView:
    return ProposalView(p.id, p.article_id, title, p.status, p.current_importance, p.proposed_importance,
                        p.evidence, p.created_at, p.decided_at, p.decided_by)


def get_proposal(session: Session, proposal_id: int, *, lock: bool = False) -> ImportanceProposal:
    """One proposal by id, or ProposalNotFound."""
    proposal = session.get(ImportanceProposal, proposal_id, with_for_update=lock) \
        if 1 <= proposal_id <= BIGINT_MAX else None
    if proposal is None:
        raise ProposalNotFound(proposal_id)
    return proposal


def _pending(session: Session, proposal_id: int) -> ImportanceProposal:
    proposal = get_proposal(session, proposal_id, lock=True)
    if proposal.status != "pending":
        raise ProposalConflict(f"proposal {proposal_id} is {proposal.status}, not pending")
    return proposal


def apply_proposal(session: Session, embedder: Embedder, proposal_id: int, *, actor: str | None) -> ProposalView:
    """Set the article's importance to the proposed one through the article update (audited as this proposal)."""
    proposal = _pending(session, proposal_id)
    article = session.get(Article, proposal.article_id, with_for_update=True)
    if article.importance != proposal.current_importance:
        raise ProposalConflict(f"the importance changed to {article.importance:g} since proposal {proposal_id} "
                               f"was made; refresh the proposals")
    update_article(session, embedder, proposal.article_id, {"importance": proposal.proposed_importance},
                   cause=ImportanceCause("proposal", actor, proposal.id),
                   change=ChangeContext(actor or "unknown", "proposal"))
    _decide(proposal, "applied", actor)
    session.flush()
    session.refresh(proposal)
    return _view(proposal, article.title)


def dismiss_proposal(session: Session, proposal_id: int, *, actor: str | None) -> ProposalView:
    """Mark a pending proposal dismissed; the importance stays as it is."""
    proposal = _pending(session, proposal_id)
    _decide(proposal, "dismissed", actor)
    session.flush()
    session.refresh(proposal)
    return _view(proposal, session.get(Article, proposal.article_id).title)
