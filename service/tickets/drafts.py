"""AI drafts for agents: grounded in the retrieved sections, citing them, never sent unless an agent sends them.

With a language model the draft is written by it (optionally following the agent's instruction, e.g.
"shorter"); without one it quotes the best section, as the extractive answer does.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Article, Ticket, TicketDraft, TicketMessage
from service.providers.llm import ChatModel, LLMError
from service.retrieval.search import SearchResult, run_search
from service.runtime import Runtime
from service.tickets.answering import (
    build_messages,
    extractive_answer,
    parse_citations,
    says_cannot_answer,
    strip_invalid_citations,
    ticket_query,
)
from service.tickets.workflow import CONTEXT_ARTICLES, context_articles, matched_texts
from service.validation import ValidationError

INSTRUCTION_MAX = 500
Link = Callable[[int, str | None], str]  # (article id, section label) → URL of the public article


@dataclass(frozen=True)
class Citation:
    """An article a draft cites as [number]."""

    number: int
    article_id: int
    title: str
    section: str | None
    url: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"number": self.number, "article_id": self.article_id, "title": self.title,
                "section": self.section, "url": self.url}


@dataclass(frozen=True)
class DraftView:
    """A stored draft: the text (citations listed with their links at the end) and what it cites."""

    id: int
    draft: str
    mode: str
    citations: list[Citation]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{draft, citations}`` plus how it was made."""
        return {"draft": self.draft, "citations": [c.to_dict() for c in self.citations], "mode": self.mode,
                "id": self.id}


def edit_ratio(draft: str | None, sent: str) -> float | None:
    """How much of the draft the agent changed: 0 sent unchanged, 1 fully replaced (word-level diff)."""
    if draft is None:
        return None
    before, after = draft.split(), sent.split()
    if before == after:
        return 0.0
    return round(1.0 - difflib.SequenceMatcher(None, before, after, autojunk=False).ratio(), 4)


def _customer_text(session: Session, ticket: Ticket) -> str:
    """The question and the customer's later follow-ups, oldest first."""
    follow_ups = session.scalars(sa.select(TicketMessage.body).where(
        TicketMessage.ticket_id == ticket.id, TicketMessage.kind == "customer").order_by(TicketMessage.id)).all()
    return "\n\n".join(dict.fromkeys([ticket.body, *follow_ups]))


def _write(chat: ChatModel | None, results: list[SearchResult], contents: dict[int, str], subject: str,
           body: str, instruction: str | None, budget: int) -> tuple[str, str, list[int]]:
    """(text, mode, cited positions): the model's draft, else the best section quoted."""
    query = ticket_query(subject, body)
    if chat is not None:
        context = context_articles(results, contents, budget)
        messages = build_messages(context, subject, body)
        if instruction:
            messages.append({"role": "user", "content": "A support agent will edit and send your answer. "
                             f"Follow the agent's instruction: {instruction}"})
        try:
            reply = chat.complete(messages)
        except LLMError:
            reply = None
        if reply is not None and not says_cannot_answer(reply.text):
            valid, _ = parse_citations(reply.text, len(context))
            if valid:
                return strip_invalid_citations(reply.text, len(context)), "llm", valid
    best = results[0]
    section = " › ".join(best.section_path) or None
    return extractive_answer(best.title, contents[best.id], query, section), "extractive", [1]


def make_draft(session: Session, runtime: Runtime, chat: ChatModel | None, ticket_id: int, *, link: Link,
               instruction: str | None = None, greeting: str = "Hello,",
               closing: str = "Best regards,\nSupport") -> DraftView:
    """Retrieve for the ticket's thread, write a draft, store it (a reply records the draft it started from)."""
    if instruction is not None and (not isinstance(instruction, str) or len(instruction) > INSTRUCTION_MAX):
        raise ValidationError("invalid instruction", {"instruction": f"must be at most {INSTRUCTION_MAX} characters"})
    ticket = session.get(Ticket, ticket_id)
    body = _customer_text(session, ticket)
    results = run_search(session, runtime.embedder, ticket_query(ticket.subject, body), limit=CONTEXT_ARTICLES,
                         weights=runtime.weights, retrieval=runtime.retrieval).results
    if not results:
        text, mode, cited, citations = "", "none", [], []
    else:
        text, mode, cited = _write(chat, results, matched_texts(session, results), ticket.subject, body,
                                   (instruction or "").strip() or None, runtime.settings.llm_context_chars)
        citations = [Citation(n, results[n - 1].id, results[n - 1].title, results[n - 1].section,
                              link(results[n - 1].id, results[n - 1].section)) for n in sorted(set(cited))]
    sources = "\n".join(f"[{c.number}] {c.title}: {c.url}" for c in citations)
    full = "\n\n".join(part for part in (greeting, text, sources, closing) if part) if text else ""
    row = TicketDraft(ticket_id=ticket_id, body=full, article_ids=[c.article_id for c in citations], mode=mode,
                      instruction=(instruction or "").strip() or None)
    session.add(row)
    session.flush()
    return DraftView(id=row.id, draft=full, mode=mode, citations=citations)


def latest_draft(session: Session, ticket_id: int) -> TicketDraft | None:
    """The newest draft made for the ticket that no reply has used yet, or None."""
    return session.scalar(sa.select(TicketDraft).where(TicketDraft.ticket_id == ticket_id,
                                                       TicketDraft.used_by_message_id.is_(None))
                          .order_by(TicketDraft.id.desc()).limit(1))


def mark_drafts_used(session: Session, ticket_id: int, message_id: int) -> None:
    """Every draft so far led to this reply: the next reply starts from a new draft (or none)."""
    session.execute(sa.update(TicketDraft).where(TicketDraft.ticket_id == ticket_id,
                                                 TicketDraft.used_by_message_id.is_(None))
                    .values(used_by_message_id=message_id))


def stored_draft_view(session: Session, row: TicketDraft, link: Link) -> DraftView:
    """A stored draft as a view; its citations by article (the sections are in the draft's own source lines)."""
    titles = dict(session.execute(sa.select(Article.id, Article.title).where(Article.id.in_(row.article_ids))).all())
    citations = [Citation(n, a, titles[a], None, link(a, None))
                 for n, a in enumerate(row.article_ids, start=1) if a in titles]
    return DraftView(id=row.id, draft=row.body, mode=row.mode, citations=citations)
