"""Article candidates: proposed from an agent's public reply, pending until an admin approves, merges or rejects.

Use cases take a session and never commit. ``propose_candidate`` is the one entry point for the agent side's
"solved with a public reply" transition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import Article, ArticleCandidate, ArticleSection
from service.knowledge.articles import BIGINT_MAX, StoredArticle, add_article, update_article
from service.knowledge.versions import ChangeContext
from service.knowledge.rewriting import rewrite_candidate
from service.knowledge.scrubbing import (
    candidate_title,
    decide_dedup,
    names_in,
    scrub_personal_data,
    scrub_reply,
    template_body,
)
from service.knowledge.sections import PATH_SEPARATOR
from service.providers.embeddings import Embedder, embed_narrow
from service.providers.llm import ChatModel, LLMError
from service.validation import ValidationError

log = logging.getLogger(__name__)
ALSO_ASKED_DAYS = 30
ALSO_ASKED_SCAN = 200  # most recent handed-off questions compared
ALSO_ASKED_MAX = 10

# The nearest existing section to a vector (text sections of the active model), by cosine.
NEAREST_SECTION_SQL = sa.text("""
SELECT s.article_id, kb.title, s.heading_path, 1.0 - (s.embedding <=> CAST(:vector AS vector)) AS similarity
FROM knowledge_sections s JOIN knowledge_base kb ON kb.id = s.article_id
WHERE s.embedding IS NOT NULL AND s.embedding_model = :model AND s.kind = 'text'
ORDER BY s.embedding <=> CAST(:vector AS vector), s.id
LIMIT 1
""")

# The gaps report's handed-off questions: tickets sent to an agent or rated unhelpful, newest first; an erased
# ticket's question is gone (its subject reads "(erased)"), so it is no one's "also asked".
HANDED_OFF_SQL = sa.text("""
SELECT t.id, t.subject FROM tickets t
WHERE t.created_at >= now() - make_interval(days => :days) AND t.id <> :ticket_id AND t.erased_at IS NULL
  AND (t.status = 'needs_agent' OR EXISTS (SELECT 1 FROM answer_feedback f WHERE f.ticket_id = t.id AND NOT f.helpful))
ORDER BY t.created_at DESC, t.id DESC
LIMIT :limit
""")


class CandidateNotFound(LookupError):
    """No article candidate with that id."""


class CandidateConflict(ValueError):
    """The candidate was already decided, or cannot be merged (no target)."""


@dataclass(frozen=True)
class NearestSection:
    """The existing section most similar to a candidate."""

    article_id: int
    article_title: str
    heading_path: tuple[str, ...]
    similarity: float

    @property
    def label(self) -> str:
        """"Article › Section" (the article alone for its lead)."""
        return PATH_SEPARATOR.join((self.article_title, *self.heading_path))


@dataclass(frozen=True)
class CandidateView:
    """A candidate as the API and the admin page show it."""

    id: int
    ticket_id: int | None
    status: str
    title: str
    body: str
    source: str
    action: str
    target: dict[str, Any] | None
    also_asked: list[dict[str, Any]]
    note: str | None
    article_id: int | None
    created_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "ticket_id": self.ticket_id, "status": self.status, "title": self.title,
                "body": self.body, "source": self.source, "action": self.action, "target": self.target,
                "also_asked": self.also_asked, "note": self.note, "article_id": self.article_id,
                "created_at": self.created_at.isoformat(),
                "decided_at": self.decided_at.isoformat() if self.decided_at else None, "decided_by": self.decided_by}


def dedup_text(title: str, body: str) -> str:
    """What is compared with the sections: title and body, as a section is embedded (title, then text)."""
    return f"{title}\n\n{body}"


def nearest_section(session: Session, vector: np.ndarray, model: str) -> NearestSection | None:
    """The most similar text section of the active model, or None in an empty knowledge base."""
    row = session.execute(NEAREST_SECTION_SQL, {"vector": vector, "model": model}).one_or_none()
    if row is None:
        return None
    return NearestSection(row.article_id, row.title, tuple(row.heading_path), float(row.similarity))


def _also_asked(session: Session, embedder: Embedder, question_vector: np.ndarray, ticket_id: int,
                threshold: float) -> list[dict[str, Any]]:
    """Handed-off questions as similar to this one as ``threshold`` (cosine), most similar first."""
    rows = session.execute(HANDED_OFF_SQL, {"days": ALSO_ASKED_DAYS, "ticket_id": ticket_id,
                                            "limit": ALSO_ASKED_SCAN}).all()
    if not rows:
        return []
    vectors = embed_narrow(embedder, [row.subject for row in rows])
    similarities = vectors @ question_vector  # unit vectors: the dot product is the cosine
    found = [{"ticket_id": row.id, "question": scrub_personal_data(row.subject, ticket_id=row.id),
              "similarity": round(float(s), 4)} for row, s in zip(rows, similarities) if s >= threshold]
    return sorted(found, key=lambda item: -item["similarity"])[:ALSO_ASKED_MAX]


def _draft(title: str, replies: list[str], chat: ChatModel | None) -> tuple[str, str, str, str | None]:
    """(title, body, source, note): the LLM's rewrite when one is configured and answers, else the template."""
    if chat is not None:
        try:
            rewrite = rewrite_candidate(chat, title, replies)
            return rewrite.title, rewrite.body, "llm", None
        except LLMError as exc:
            log.warning("candidate rewrite failed, keeping the template: %s", exc)
            return title, template_body(replies), "template", f"the language model failed ({exc}); template kept"
    return title, template_body(replies), "template", None


def propose_candidate(session: Session, *, embedder: Embedder, settings: Settings, ticket_id: int,
                      question: str, reply_bodies: list[str], chat: ChatModel | None = None,
                      names: Sequence[str] = ()) -> CandidateView:
    """A pending candidate from a solved ticket: ``reply_bodies`` are the agent's public replies only.

    ``names`` (the customer's, the agents') are scrubbed with those the texts introduce, before and after the
    language model, with greetings, sign-offs and every number that identifies someone.

    Idempotent per ticket: a second call returns the first candidate.
    """
    existing = session.scalar(sa.select(ArticleCandidate).where(ArticleCandidate.ticket_id == ticket_id))
    if existing is not None:
        return candidate_view(session, existing)
    known = [*names, *names_in([question, *reply_bodies])]

    def scrub(text: str) -> str:
        return scrub_reply(scrub_personal_data(text, ticket_id=ticket_id), names=known)

    replies = [scrubbed for r in reply_bodies if r and r.strip() and (scrubbed := scrub(r))]
    if not replies:
        raise ValidationError("no candidate", {"reply_bodies": "needs at least one public reply"})
    title, body, source, note = _draft(candidate_title(scrub(question) or "Untitled question"), replies, chat)
    title, body = scrub(title), scrub(body)
    candidate_vector, question_vector = embed_narrow(embedder, [dedup_text(title, body), title])
    nearest = nearest_section(session, candidate_vector, embedder.model_name)
    decision = decide_dedup(nearest.similarity if nearest else None, settings.candidate_dedup_threshold)
    candidate = ArticleCandidate(
        ticket_id=ticket_id, title=title[:300], body=body, source=source, action=decision.action, note=note,
        target_article_id=nearest.article_id if nearest else None,
        target_heading_path=list(nearest.heading_path) if nearest else None,
        target_similarity=nearest.similarity if nearest else None,
        also_asked=_also_asked(session, embedder, question_vector, ticket_id,
                               settings.candidate_also_asked_threshold))
    session.add(candidate)
    session.flush()
    return candidate_view(session, candidate)


def _view(c: ArticleCandidate, target_title: str | None) -> CandidateView:
    target = None
    if c.target_article_id is not None:
        path = tuple(c.target_heading_path or ())
        target = {"article_id": c.target_article_id, "article_title": target_title, "heading_path": list(path),
                  "label": PATH_SEPARATOR.join((target_title or "", *path)), "similarity": c.target_similarity}
    return CandidateView(c.id, c.ticket_id, c.status, c.title, c.body, c.source, c.action, target,
                         list(c.also_asked), c.note, c.article_id, c.created_at, c.decided_at, c.decided_by)


def candidate_view(session: Session, c: ArticleCandidate) -> CandidateView:
    """The candidate as stored, with its target's current title."""
    session.refresh(c)
    return _view(c, session.scalar(sa.select(Article.title).where(Article.id == c.target_article_id)))


def list_candidates(session: Session, *, status: str | None = "pending", limit: int = 100) -> list[CandidateView]:
    """Candidates (pending by default), newest first, with their targets' titles (one statement)."""
    query = (sa.select(ArticleCandidate, Article.title)
             .outerjoin(Article, Article.id == ArticleCandidate.target_article_id)
             .order_by(ArticleCandidate.created_at.desc(), ArticleCandidate.id.desc()))
    if status is not None:
        query = query.where(ArticleCandidate.status == status)
    return [_view(c, title) for c, title in session.execute(query.limit(limit))]


def get_candidate(session: Session, candidate_id: int, *, lock: bool = False) -> ArticleCandidate:
    """One candidate by id, or CandidateNotFound."""
    found = session.get(ArticleCandidate, candidate_id, with_for_update=lock) \
        if 1 <= candidate_id <= BIGINT_MAX else None
    if found is None:
        raise CandidateNotFound(candidate_id)
    return found


def _pending(session: Session, candidate_id: int) -> ArticleCandidate:
    candidate = get_candidate(session, candidate_id, lock=True)
    if candidate.status != "pending":
        raise CandidateConflict(f"candidate {candidate_id} is {candidate.status}, not pending")
    return candidate


def _decide(candidate: ArticleCandidate, status: str, actor: str | None, article_id: int | None) -> None:
    candidate.status, candidate.decided_by, candidate.article_id = status, actor, article_id
    candidate.decided_at = sa.func.clock_timestamp()


def approve_candidate(session: Session, embedder: Embedder, candidate_id: int, *, edits: dict[str, Any],
                      actor: str | None) -> tuple[CandidateView, StoredArticle]:
    """Publish the candidate (with the admin's edits) as a new article through the usual add: embedded at once."""
    candidate = _pending(session, candidate_id)
    fields = {"title": edits.get("title", candidate.title), "content": edits.get("content", candidate.body),
              "category": edits.get("category")}
    article = add_article(session, embedder, fields, change=ChangeContext(actor or "unknown", "candidate"))
    _decide(candidate, "approved", actor, article.id)
    session.flush()
    return candidate_view(session, candidate), article


def merge_point(session: Session, article_id: int, heading_path: list[str], content_length: int) -> int:
    """Where added text goes: after the last text window of that section (the article's end if it is gone)."""
    ends = session.scalars(sa.select(ArticleSection.char_end).where(
        ArticleSection.article_id == article_id, ArticleSection.kind == "text",
        ArticleSection.heading_path == sa.cast(heading_path, ArticleSection.heading_path.type))).all()
    return min(max(ends), content_length) if ends else content_length


def merge_candidate(session: Session, embedder: Embedder, candidate_id: int, *, edits: dict[str, Any],
                    actor: str | None) -> tuple[CandidateView, StoredArticle]:
    """Add the candidate's text (or the admin's edit of it) to its target section through the article update."""
    candidate = _pending(session, candidate_id)
    if candidate.target_article_id is None:
        raise CandidateConflict(f"candidate {candidate_id} has no existing section to merge into")
    article = session.get(Article, candidate.target_article_id, with_for_update=True)
    text = str(edits.get("content", candidate.body)).strip()
    at = merge_point(session, article.id, list(candidate.target_heading_path or []), len(article.content))
    content = f"{article.content[:at].rstrip()}\n\n{text}\n\n{article.content[at:].lstrip()}".strip()
    stored = update_article(session, embedder, article.id, {"content": content},
                            change=ChangeContext(actor or "unknown", "candidate"))
    _decide(candidate, "merged", actor, article.id)
    session.flush()
    return candidate_view(session, candidate), stored


def reject_candidate(session: Session, candidate_id: int, *, actor: str | None) -> CandidateView:
    """Mark the candidate rejected; nothing is published."""
    candidate = _pending(session, candidate_id)
    _decide(candidate, "rejected", actor, None)
    session.flush()
    return candidate_view(session, candidate)
