"""HTTP API of the knowledge loop: article candidates, importance proposals, the importance audit log."""

from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from service.db.models import CANDIDATE_STATUSES, PROPOSAL_STATUSES
from service.knowledge.articles import get_article
from service.knowledge.audit import ImportanceCause, importance_history
from service.knowledge.candidates import (
    CandidateConflict,
    CandidateNotFound,
    approve_candidate,
    candidate_view,
    get_candidate,
    list_candidates,
    merge_candidate,
    reject_candidate,
)
from service.knowledge.importance import (
    ProposalConflict,
    ProposalNotFound,
    apply_proposal,
    dismiss_proposal,
    get_proposal,
    list_proposals,
    refresh_proposals,
)
from service.retrieval.what_if import what_if_for_questions
from service.web.errors import ApiError, error_response
from service.web.requests import db, json_body, runtime

learning_api = Blueprint("learning_api", __name__, url_prefix="/api")
EDIT_FIELDS = ("title", "content", "category")


def actor() -> str | None:
    """Who is calling, for the audit log: ``admin:<username>`` (a logged-in admin) or ``token:<name>``."""
    identity = g.get("identity")
    if identity is None:
        return None
    return f"{'admin' if identity.kind == 'session' else 'token'}:{identity.name}"


def importance_cause(reason_for_token: str = "api") -> ImportanceCause:
    """``manual`` for an admin on the pages (their cookie), else ``reason_for_token``, with the actor."""
    identity = g.get("identity")
    reason = "manual" if identity is not None and identity.kind == "session" else reason_for_token
    return ImportanceCause(reason, actor())


def _status_filter(allowed: tuple[str, ...]) -> str | None:
    """``?status=`` (default pending; ``all`` for every status), or a 400."""
    status = request.args.get("status", "pending")
    if status == "all":
        return None
    if status not in allowed:
        raise ApiError(400, "validation_error", "invalid status filter",
                       {"status": f"must be all or one of {', '.join(allowed)}"})
    return status


@learning_api.errorhandler(CandidateNotFound)
@learning_api.errorhandler(ProposalNotFound)
def _not_found(exc: LookupError):
    kind = "article candidate" if isinstance(exc, CandidateNotFound) else "importance proposal"
    return error_response(404, "not_found", f"{kind} {exc.args[0]} does not exist", {"id": exc.args[0]})


@learning_api.errorhandler(CandidateConflict)
@learning_api.errorhandler(ProposalConflict)
def _conflict(exc: ValueError):
    return error_response(409, "conflict", str(exc))


@learning_api.get("/article-candidates")
def candidates_index():
    """Candidates, newest first; ``?status=pending`` (default), approved, merged, rejected or all."""
    return jsonify({"candidates": [c.to_dict() for c in list_candidates(db(), status=_status_filter(
        CANDIDATE_STATUSES))]})


@learning_api.get("/article-candidates/<int:candidate_id>")
def candidates_show(candidate_id: int):
    """One candidate."""
    return jsonify({"candidate": candidate_view(db(), get_candidate(db(), candidate_id)).to_dict()})


@learning_api.post("/article-candidates/<int:candidate_id>/approve")
def candidates_approve(candidate_id: int):
    """``{title?, content?, category?}`` (edits) → a new article, embedded and searchable at once."""
    candidate, article = approve_candidate(db(), runtime().embedder, candidate_id, edits=json_body(EDIT_FIELDS),
                                           actor=actor())
    db().commit()
    return jsonify({"candidate": candidate.to_dict(), "article": article.to_dict()})


@learning_api.post("/article-candidates/<int:candidate_id>/merge")
def candidates_merge(candidate_id: int):
    """``{content?}`` → the text added to the candidate's target section (re-embedded at once)."""
    candidate, article = merge_candidate(db(), runtime().embedder, candidate_id, edits=json_body(("content",)),
                                         actor=actor())
    db().commit()
    return jsonify({"candidate": candidate.to_dict(), "article": article.to_dict()})


@learning_api.post("/article-candidates/<int:candidate_id>/reject")
def candidates_reject(candidate_id: int):
    """Reject the candidate; nothing is published."""
    candidate = reject_candidate(db(), candidate_id, actor=actor())
    db().commit()
    return jsonify({"candidate": candidate.to_dict()})


@learning_api.get("/importance-proposals")
def proposals_index():
    """Proposals, largest move first; ``?status=pending`` (default), applied, dismissed, superseded or all."""
    return jsonify({"proposals": [p.to_dict() for p in list_proposals(db(), status=_status_filter(
        PROPOSAL_STATUSES))]})


@learning_api.post("/importance-proposals/refresh")
def proposals_refresh():
    """Recount the outcomes over the window and store the rule's proposals; returns the pending ones."""
    proposals = refresh_proposals(db(), runtime().settings)
    db().commit()
    return jsonify({"proposals": [p.to_dict() for p in proposals]})


@learning_api.get("/importance-proposals/<int:proposal_id>/preview")
def proposals_preview(proposal_id: int):
    """The what-if ranking at the proposed importance for the questions that produced the proposal
    (``?question=`` adds one of your own first)."""
    proposal = get_proposal(db(), proposal_id)
    questions = [q["question"] for q in proposal.evidence.get("questions", [])]
    if request.args.get("question", "").strip():
        questions = [request.args["question"], *questions]
    what_ifs = what_if_for_questions(db(), runtime(), proposal.article_id, proposal.proposed_importance, questions)
    return jsonify({"proposal_id": proposal.id, "article_id": proposal.article_id,
                    "proposed_importance": proposal.proposed_importance,
                    "questions": [w.to_dict() for w in what_ifs]})


@learning_api.post("/importance-proposals/<int:proposal_id>/apply")
def proposals_apply(proposal_id: int):
    """Set the article's importance to the proposed one (through the article update; audited)."""
    proposal = apply_proposal(db(), runtime().embedder, proposal_id, actor=actor())
    db().commit()
    article = get_article(db(), proposal.article_id, runtime().embedder.model_name)
    return jsonify({"proposal": proposal.to_dict(), "article": article.to_dict()})


@learning_api.post("/importance-proposals/<int:proposal_id>/dismiss")
def proposals_dismiss(proposal_id: int):
    """Dismiss the proposal; the importance stays."""
    proposal = dismiss_proposal(db(), proposal_id, actor=actor())
    db().commit()
    return jsonify({"proposal": proposal.to_dict()})


@learning_api.get("/articles/<int:article_id>/importance-changes")
def importance_changes(article_id: int):
    """The article's importance audit log, newest first: who, when, from → to, why."""
    get_article(db(), article_id, runtime().embedder.model_name)  # 404 for an unknown article
    return jsonify({"article_id": article_id,
                    "changes": [c.to_dict() for c in importance_history(db(), article_id)]})
