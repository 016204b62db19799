"""AI drafts for agents: grounded in the retrieved sections, citing them, never sent unless an agent sends them.

With a language model the draft is written by it (optionally following the agent's instruction, e.g.
"shorter"); without one it quotes the best section, as the extractive answer does. Only articles that clear the
customers' answer gate, and solved tickets close to the question, are evidence; with neither, the draft says so
(issue 25: honest drafts). A solved ticket closer than the best article is the one quoted (issue 34 item 7).

Drafts follow the conversation (issue 34 item 8): a customer message newer than a draft makes it stale, so the
next one is remade from the whole thread; what the customer already got is never offered again; after an agent's
reply nothing is offered until the customer writes; the draft signs with the agent's display name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AdminUser, Article, Ticket, TicketDraft, TicketMessage
from service.providers.llm import ChatModel, LLMError
from service.runtime import Runtime
from service.tickets.answering import (
    build_messages,
    extractive_answer,
    parse_citations,
    says_cannot_answer,
    strip_invalid_citations,
    ticket_query,
)
from service.tickets.draft_evidence import (
    Evidence,
    NearestArticle,
    gather_evidence,
    mark_ticket_citations,
    ticket_contexts,
)
from service.tickets.team import display_name
from service.tickets.workflow import context_articles
from service.validation import ValidationError

INSTRUCTION_MAX = 500
CLOSING = "Best regards,"
SENT_TEXT_CHARS = 1500  # of each reply the customer already got, in the model's context
Link = Callable[[int, str | None], str]  # (article id, section label) → URL of the public article
TicketLink = Callable[[int], str]  # ticket id → where an agent opens it


def agent_ticket_path(ticket_id: int) -> str:
    """The agent's workspace for a ticket (a path: the draft's ticket citations are for agents only)."""
    return f"/admin/inbox/{ticket_id}"


@dataclass(frozen=True)
class Citation:
    """What a draft cites as [number]: an article, or a similar solved ticket (``ticket_id``, for agents only)."""

    number: int
    article_id: int | None
    title: str
    section: str | None
    url: str
    ticket_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{number, article_id, title, section, url}`` or ``{number, ticket_id, title, url}``."""
        if self.ticket_id is not None:
            return {"number": self.number, "ticket_id": self.ticket_id, "title": self.title, "url": self.url}
        return {"number": self.number, "article_id": self.article_id, "title": self.title,
                "section": self.section, "url": self.url}


@dataclass(frozen=True)
class DraftView:
    """A stored draft: the text (citations listed with their links at the end), what it cites, and whether
    evidence above its threshold backs it (``notice`` says so when no article clears the answer gate, and
    ``nearest`` lists the articles below it: shown as nearest, never as cited)."""

    id: int
    draft: str
    mode: str
    citations: list[Citation]
    grounded: bool = True
    notice: str | None = None
    nearest: list[NearestArticle] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{draft, citations, grounded, notice, nearest}`` plus how it was made."""
        return {"draft": self.draft, "citations": [c.to_dict() for c in self.citations], "mode": self.mode,
                "id": self.id, "grounded": self.grounded, "notice": self.notice,
                "nearest": [n.to_dict() for n in self.nearest]}


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


def _write(chat: ChatModel | None, evidence: Evidence, subject: str, body: str, instruction: str | None,
           budget: int) -> tuple[str, str, list[int], int]:
    """(text, mode, cited positions, how many positions are articles): the model's draft from the evidence
    (articles first, then solved tickets), else the best article quoted, else (or when it is closer than the
    best article) the closest solved ticket's scrubbed reply."""
    results = evidence.results
    if chat is not None:
        context = context_articles(results, evidence.contents, budget) if results else []
        articles = len(context)
        context += ticket_contexts(evidence.tickets, articles + 1)
        messages = build_messages(context, subject, body)
        if evidence.sent:  # issue 34: the customer already has these; a draft that repeats them helps nobody
            messages.append({"role": "user", "content": "The customer already got these replies; do not repeat "
                             "them:\n\n" + "\n\n---\n\n".join(text[:SENT_TEXT_CHARS] for text in evidence.sent)})
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
                return strip_invalid_citations(reply.text, len(context)), "llm", valid, articles
    if results and not ticket_is_closer(evidence):
        best = results[0]
        section = " › ".join(best.section_path) or None
        return (extractive_answer(best.title, evidence.contents[best.id], ticket_query(subject, body), section),
                "extractive", [1], len(results))
    best_ticket = evidence.tickets[0]
    return (f"A similar solved ticket {{T-{best_ticket.ticket_id}}} was answered with:\n\n{best_ticket.reply}",
            "extractive", [1], 0)


def ticket_is_closer(evidence: Evidence) -> bool:
    """Whether the best solved ticket is closer to the question than the best article (issue 34 item 7)."""
    best = evidence.best_article_similarity
    return bool(evidence.tickets) and best is not None and evidence.tickets[0].similarity > best


def _citations(evidence: Evidence, cited: list[int], link: Link, ticket_url: TicketLink,
               articles: int) -> list[Citation]:
    """The cited positions as citations: 1..articles are articles, the rest solved tickets."""
    found = []
    for n in sorted(set(cited)):
        if n <= articles:
            r = evidence.results[n - 1]
            found.append(Citation(n, r.id, r.title, r.section, link(r.id, r.section)))
        elif n - articles <= len(evidence.tickets):
            t = evidence.tickets[n - articles - 1]
            found.append(Citation(n, None, f"Solved ticket T-{t.ticket_id}", None, ticket_url(t.ticket_id),
                                  ticket_id=t.ticket_id))
    return found


def draft_signer(session: Session, ticket: Ticket, user_id: int | None) -> str:
    """Who signs a draft: the agent asking for it, else the ticket's assignee, by display name ("Support" if unset)."""
    for candidate in (user_id, ticket.assignee_id):
        name = session.scalar(sa.select(AdminUser.display_name).where(AdminUser.id == candidate)) if candidate else None
        if (name or "").strip():
            return name.strip()
    return display_name(None)


def signed_by(view: DraftView, name: str) -> DraftView:
    """The draft signed by ``name`` (another agent opening a draft made for a colleague signs it as themself)."""
    head, found, _ = view.draft.rpartition(f"\n\n{CLOSING}\n")
    if not found:
        return view
    return replace(view, draft=f"{head}\n\n{CLOSING}\n{name}")


def make_draft(session: Session, runtime: Runtime, chat: ChatModel | None, ticket_id: int, *, link: Link,
               instruction: str | None = None, greeting: str = "Hello,", user_id: int | None = None,
               ticket_url: TicketLink = agent_ticket_path) -> DraftView:
    """Retrieve for the ticket's whole thread, write a draft, store it (a reply records the draft it started from).

    Honest: with no article over the answer gate and no close solved ticket, the draft holds a greeting and the
    line saying so (nearest match and score), cites nothing, and ``grounded`` is false. It signs with the display
    name of ``user_id`` (the agent asking), else of the assignee.
    """
    if instruction is not None and (not isinstance(instruction, str) or len(instruction) > INSTRUCTION_MAX):
        raise ValidationError("invalid instruction", {"instruction": f"must be at most {INSTRUCTION_MAX} characters"})
    ticket = session.get(Ticket, ticket_id)
    body = _customer_text(session, ticket)
    evidence = gather_evidence(session, runtime, ticket, body)
    closing = f"{CLOSING}\n{draft_signer(session, ticket, user_id)}"
    if not evidence.grounded:
        full = "\n\n".join((greeting, evidence.notice, closing))
        return _store_draft(session, ticket_id, full, "none", [], evidence, instruction)
    text, mode, cited, articles = _write(chat, evidence, ticket.subject, body, (instruction or "").strip() or None,
                                         runtime.settings.llm_context_chars)
    citations = _citations(evidence, cited, link, ticket_url, articles)
    if mode == "llm":  # the model cites tickets as [n]; a quoted reply keeps its own brackets
        text = mark_ticket_citations(text, {c.number: c.ticket_id for c in citations if c.ticket_id is not None})
    sources = "\n".join(f"[{c.number}] {c.title}: {c.url}" for c in citations if c.ticket_id is None)
    full = "\n\n".join(part for part in (greeting, text, sources, closing) if part)
    return _store_draft(session, ticket_id, full, mode, citations, evidence, instruction)


def _store_draft(session: Session, ticket_id: int, full: str, mode: str, citations: list[Citation],
                 evidence: Evidence, instruction: str | None) -> DraftView:
    row = TicketDraft(ticket_id=ticket_id, body=full, mode=mode, instruction=(instruction or "").strip() or None,
                      article_ids=[c.article_id for c in citations if c.ticket_id is None],
                      ticket_ids=[c.ticket_id for c in citations if c.ticket_id is not None],
                      grounded=evidence.grounded, notice=evidence.notice,
                      thread_message_id=_newest_message_id(session, ticket_id),
                      nearest=[n.to_dict() for n in evidence.nearest])
    session.add(row)
    session.flush()
    return DraftView(id=row.id, draft=full, mode=mode, citations=citations, grounded=evidence.grounded,
                     notice=evidence.notice, nearest=evidence.nearest)


def _newest_message_id(session: Session, ticket_id: int) -> int | None:
    return session.scalar(sa.select(sa.func.max(TicketMessage.id)).where(TicketMessage.ticket_id == ticket_id))


def latest_draft(session: Session, ticket_id: int) -> TicketDraft | None:
    """The newest draft made for the ticket that no reply has used yet and no customer message has overtaken
    (a follow-up makes it stale: the next draft is remade from the whole thread), or None."""
    newest_customer = (sa.select(sa.func.max(TicketMessage.id))
                       .where(TicketMessage.ticket_id == ticket_id, TicketMessage.kind == "customer")
                       .scalar_subquery())
    return session.scalar(sa.select(TicketDraft).where(
        TicketDraft.ticket_id == ticket_id, TicketDraft.used_by_message_id.is_(None),
        sa.or_(TicketDraft.thread_message_id.is_(None), newest_customer.is_(None),
               TicketDraft.thread_message_id >= newest_customer))
        .order_by(TicketDraft.id.desc()).limit(1))


def customer_has_last_word(session: Session, ticket_id: int) -> bool:
    """Whether a draft is due: the newest public message is not an agent's reply (after a send, nothing is
    offered until the customer writes again)."""
    last = session.scalar(sa.select(TicketMessage.kind).where(
        TicketMessage.ticket_id == ticket_id, TicketMessage.kind.in_(("customer", "ai_answer", "agent_reply")))
        .order_by(TicketMessage.id.desc()).limit(1))
    return last != "agent_reply"


def mark_drafts_used(session: Session, ticket_id: int, message_id: int) -> None:
    """Every draft so far led to this reply: the next reply starts from a new draft (or none)."""
    session.execute(sa.update(TicketDraft).where(TicketDraft.ticket_id == ticket_id,
                                                 TicketDraft.used_by_message_id.is_(None))
                    .values(used_by_message_id=message_id))


def stored_draft_view(session: Session, row: TicketDraft, link: Link,
                      ticket_url: TicketLink = agent_ticket_path) -> DraftView:
    """A stored draft as a view; its citations by article then ticket (sections are in the draft's source lines)."""
    titles = dict(session.execute(sa.select(Article.id, Article.title).where(Article.id.in_(row.article_ids))).all())
    citations = [Citation(n, a, titles[a], None, link(a, None))
                 for n, a in enumerate(row.article_ids, start=1) if a in titles]
    citations += [Citation(len(row.article_ids) + n, None, f"Solved ticket T-{t}", None, ticket_url(t), ticket_id=t)
                  for n, t in enumerate(row.ticket_ids, start=1)]
    return DraftView(id=row.id, draft=row.body, mode=row.mode, citations=citations, grounded=row.grounded,
                     notice=row.notice, nearest=[NearestArticle(**n) for n in row.nearest or []])
