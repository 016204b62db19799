"""Admin pages of the knowledge loop: /admin/importance (proposals) and /admin/candidates (draft articles)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from service.knowledge.candidates import (
    CandidateConflict,
    CandidateNotFound,
    approve_candidate,
    list_candidates,
    merge_candidate,
    reject_candidate,
)
from service.knowledge.importance import (
    ProposalConflict,
    ProposalNotFound,
    apply_proposal,
    dismiss_proposal,
    list_proposals,
    refresh_proposals,
)
from service.knowledge.importance_progress import proposal_progress
from service.retrieval.what_if import what_if_for_questions
from service.validation import ValidationError
from service.web.admin.pages import nav_context
from service.web.learning import actor
from service.web.requests import db, runtime

admin_learning = Blueprint("admin_learning", __name__, url_prefix="/admin")
admin_learning.context_processor(nav_context)
RECENT = 10


@admin_learning.errorhandler(ProposalNotFound)
@admin_learning.errorhandler(CandidateNotFound)
def _not_found_page(exc: LookupError):
    kind = "proposal" if isinstance(exc, ProposalNotFound) else "candidate"
    return render_template("admin/error.html", status=404, message=f"That {kind} does not exist."), 404


@admin_learning.get("/importance")
def importance():
    """Pending proposals with their evidence and the what-if ranking for the questions behind them."""
    proposals = list_proposals(db())
    what_ifs = {p.id: what_if_for_questions(db(), runtime(), p.article_id, p.proposed_importance,
                                            [q["question"] for q in p.evidence.get("questions", [])])
                for p in proposals}
    decided = [p for p in list_proposals(db(), status=None) if p.status != "pending"][:RECENT]
    return render_template("admin/importance.html", proposals=proposals, what_ifs=what_ifs, decided=decided,
                           settings=runtime().settings, progress=proposal_progress(db(), runtime().settings))


@admin_learning.post("/importance/refresh")
def importance_refresh():
    """Recount the outcomes and store the rule's proposals."""
    settings = runtime().settings
    count = len(refresh_proposals(db(), settings))
    progress = proposal_progress(db(), settings)
    db().commit()
    short = sum(1 for row in progress if row.missing)
    flash(f"Recounted the last {settings.importance_window_days} days: {len(progress)} article"
          f"{'' if len(progress) == 1 else 's'} with outcomes, {count} proposal{'' if count == 1 else 's'} pending"
          f"{f', {short} still short of {settings.importance_min_outcomes} outcomes' if short else ''}.", "success")
    return redirect(url_for("admin_learning.importance"))


@admin_learning.post("/importance/<int:proposal_id>/<decision>")
def importance_decide(proposal_id: int, decision: str):
    """Apply (through the audited importance update) or dismiss one proposal."""
    if decision not in ("apply", "dismiss"):
        abort(404)
    try:
        if decision == "apply":
            done = apply_proposal(db(), runtime().embedder, proposal_id, actor=actor())
            message = f"Applied: “{done.article_title}” importance {done.current_importance:g} → " \
                      f"{done.proposed_importance:g}."
        else:
            done = dismiss_proposal(db(), proposal_id, actor=actor())
            message = f"Dismissed the proposal for “{done.article_title}”."
    except ProposalConflict as exc:
        db().rollback()
        flash(f"Not done: {exc}.", "error")
    else:
        db().commit()
        flash(message, "success")
    return redirect(url_for("admin_learning.importance"))


@admin_learning.get("/candidates")
def candidates():
    """Pending candidates, editable, with their dedup target and the similar questions also asked."""
    recent = [c for c in list_candidates(db(), status=None, limit=50) if c.status != "pending"][:RECENT]
    return render_template("admin/candidates.html", candidates=list_candidates(db()), decided=recent,
                           threshold=runtime().settings.candidate_dedup_threshold)


def _edits(*names: str) -> dict[str, str | None]:
    """The edited fields from the form (an empty category is none)."""
    edits: dict[str, str | None] = {name: request.form.get(name, "") for name in names}
    if "category" in edits:
        edits["category"] = (edits["category"] or "").strip() or None
    return edits


@admin_learning.post("/candidates/<int:candidate_id>/<decision>")
def candidates_decide(candidate_id: int, decision: str):
    """Approve as a new article (with edits), merge into the target section, or reject."""
    if decision not in ("approve", "merge", "reject"):
        abort(404)
    try:
        if decision == "approve":
            _, article = approve_candidate(db(), runtime().embedder, candidate_id,
                                           edits=_edits("title", "content", "category"), actor=actor())
            message = f"Published “{article.title}” ({article.embedding_status})."
        elif decision == "merge":
            _, article = merge_candidate(db(), runtime().embedder, candidate_id, edits=_edits("content"),
                                         actor=actor())
            message = f"Added to “{article.title}” ({article.embedding_status})."
        else:
            reject_candidate(db(), candidate_id, actor=actor())
            message = "Rejected; nothing was published."
    except (CandidateConflict, ValidationError) as exc:
        db().rollback()
        flash(f"Not done: {getattr(exc, 'message', exc)}.", "error")
    else:
        db().commit()
        flash(message, "success")
    return redirect(url_for("admin_learning.candidates"))
