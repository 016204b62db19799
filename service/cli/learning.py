"""``supportrag candidates …`` and ``supportrag importance …``: the knowledge loop from the console."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

import click

from service.cli.context import connect
from service.db.models import CANDIDATE_STATUSES, PROPOSAL_STATUSES
from service.knowledge.articles import ArticleNotFound, update_article
from service.knowledge.versions import ChangeContext
from service.knowledge.audit import ImportanceCause, importance_history
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

ACTOR = "cli"


@contextmanager
def _refusals() -> Iterator[None]:
    """Unknown ids and decided items as one-line CLI errors."""
    try:
        yield
    except (CandidateNotFound, ProposalNotFound, ArticleNotFound) as exc:
        kind = {CandidateNotFound: "candidate", ProposalNotFound: "proposal"}.get(type(exc), "article")
        raise click.ClickException(f"no {kind} {exc.args[0]}") from exc
    except (CandidateConflict, ProposalConflict) as exc:
        raise click.ClickException(str(exc)) from exc


@click.group()
def candidates() -> None:
    """Article candidates drafted from agents' replies: list, approve, merge, reject."""


@candidates.command("list")
@click.option("--status", type=click.Choice(["all", *CANDIDATE_STATUSES]), default="pending", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def candidates_list(status: str, as_json: bool) -> None:
    """Candidates, newest first, with their dedup verdict."""
    runtime = connect()
    with runtime.session() as session:
        items = list_candidates(session, status=None if status == "all" else status)
    if as_json:
        click.echo(json.dumps([c.to_dict() for c in items], indent=2))
        return
    if not items:
        click.echo(f"no {'' if status == 'all' else status + ' '}candidates")
    for c in items:
        verdict = f"add to {c.target['label']}" if c.action == "add_to" else "new article"
        similarity = f" (nearest {c.target['similarity']:.2f})" if c.target else ""
        click.echo(f"{c.id:4d}  [{c.status}] {c.title}\n      {verdict}{similarity}; "
                   f"also asked {len(c.also_asked)}; ticket {c.ticket_id or '-'}")


@candidates.command("approve")
@click.argument("candidate_id", type=int)
@click.option("--title", help="Publish with this title instead.")
@click.option("--category", help="The new article's category.")
def candidates_approve(candidate_id: int, title: str | None, category: str | None) -> None:
    """Publish CANDIDATE_ID as a new article (embedded, searchable at once)."""
    runtime = connect()
    edits = {k: v for k, v in (("title", title), ("category", category)) if v is not None}
    with _refusals(), runtime.session() as session:
        _, article = approve_candidate(session, runtime.embedder, candidate_id, edits=edits, actor=ACTOR)
    click.echo(f"published article {article.id}: {article.title} ({article.embedding_status})")


@candidates.command("merge")
@click.argument("candidate_id", type=int)
def candidates_merge(candidate_id: int) -> None:
    """Add CANDIDATE_ID's text to its nearest existing section."""
    runtime = connect()
    with _refusals(), runtime.session() as session:
        candidate, article = merge_candidate(session, runtime.embedder, candidate_id, edits={}, actor=ACTOR)
    click.echo(f"added to {candidate.target['label']} (article {article.id}, {article.embedding_status})")


@candidates.command("reject")
@click.argument("candidate_id", type=int)
def candidates_reject(candidate_id: int) -> None:
    """Reject CANDIDATE_ID; nothing is published."""
    runtime = connect()
    with _refusals(), runtime.session() as session:
        reject_candidate(session, candidate_id, actor=ACTOR)
    click.echo(f"rejected candidate {candidate_id}")


@click.group()
def importance() -> None:
    """Importance proposals from outcomes, applying them, and the audit log."""


@importance.command("proposals")
@click.option("--status", type=click.Choice(["all", *PROPOSAL_STATUSES]), default="pending", show_default=True)
@click.option("--no-recount", is_flag=True, help="List what is stored without recounting the outcomes first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def importance_proposals(status: str, no_recount: bool, as_json: bool) -> None:
    """Recount the outcomes over the window, store the rule's proposals and list them with their evidence."""
    runtime = connect()
    with runtime.session() as session:
        if not no_recount:
            refresh_proposals(session, runtime.settings)
        items = list_proposals(session, status=None if status == "all" else status)
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in items], indent=2))
        return
    if not items:
        click.echo("no proposals")
    for p in items:
        e = p.evidence
        click.echo(f"{p.id:4d}  [{p.status}] {p.article_title} (article {p.article_id}): "
                   f"{p.current_importance:g} → {p.proposed_importance:g}\n      {e['reason']}: {e['solved']} solved, "
                   f"{e['escalated']} escalated, {e['not_helpful']} not helpful, drafts {e['drafts_unchanged']} "
                   f"unchanged / {e['drafts_replaced']} replaced; smoothed {e['smoothed_rate']:.2f} vs mean "
                   f"{e['mean_rate']:.2f}")


@importance.command("apply")
@click.argument("proposal_id", type=int)
def importance_apply(proposal_id: int) -> None:
    """Apply PROPOSAL_ID through the importance update (audited as that proposal)."""
    runtime = connect()
    with _refusals(), runtime.session() as session:
        p = apply_proposal(session, runtime.embedder, proposal_id, actor=ACTOR)
    click.echo(f"applied proposal {p.id}: {p.article_title} {p.current_importance:g} → {p.proposed_importance:g}")


@importance.command("dismiss")
@click.argument("proposal_id", type=int)
def importance_dismiss(proposal_id: int) -> None:
    """Dismiss PROPOSAL_ID; the importance stays."""
    runtime = connect()
    with _refusals(), runtime.session() as session:
        dismiss_proposal(session, proposal_id, actor=ACTOR)
    click.echo(f"dismissed proposal {proposal_id}")


@importance.command("set")
@click.argument("article_id", type=int)
@click.argument("value", type=float)
def importance_set(article_id: int, value: float) -> None:
    """Set ARTICLE_ID's importance to VALUE (0–2), audited as a CLI change."""
    runtime = connect()
    with _refusals(), runtime.session() as session:
        article = update_article(session, runtime.embedder, article_id, {"importance": value},
                                 cause=ImportanceCause("cli", ACTOR), change=ChangeContext(ACTOR, "cli"))
    click.echo(f"article {article.id} importance {article.importance:g}")


@importance.command("log")
@click.argument("article_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def importance_log(article_id: int, as_json: bool) -> None:
    """ARTICLE_ID's importance changes, newest first: when, from → to, why, who."""
    runtime = connect()
    with runtime.session() as session:
        changes = importance_history(session, article_id)
    if as_json:
        click.echo(json.dumps([c.to_dict() for c in changes], indent=2))
        return
    if not changes:
        click.echo(f"no importance changes for article {article_id}")
    for c in changes:
        click.echo(f"{c.created_at:%Y-%m-%d %H:%M}  {c.old_importance:g} → {c.new_importance:g}  {c.why}"
                   f"  {c.actor or '-'}")
