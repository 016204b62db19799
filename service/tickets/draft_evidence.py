"""What an agent's draft may rest on (issue 25 items 2 and 3, issue 34 items 7 and 8): the articles that clear the
answer gate and the solved tickets close enough to the question, minus what the customer already got. Pure helpers
for the references, the "nothing above the threshold" notice and the repeat check, and the reads that gather them."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AdminUser, Ticket, TicketMessage
from service.knowledge.scrubbing import scrub_reply
from service.retrieval.search import SearchResult, run_search
from service.runtime import Runtime
from service.tickets.answering import ContextArticle, GateDecision, above_floor, best_passage, readable, ticket_query
from service.tickets.similar import SimilarTicket, similar_solved_tickets
from service.tickets.workflow import CONTEXT_ARTICLES, answer_gate, matched_texts

_CITATION = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
TICKET_TEXT_CHARS = 1500  # of a solved ticket's reply, in the model's context
NEAREST_SHOWN = 3  # articles under the gate listed for the agent as "nearest, below the threshold"
# A passage is "already sent" when this share of its words, in order, is in one message the customer got.
REPEAT_SHARE = 0.8
SENT_KINDS = ("ai_answer", "agent_reply")  # what the customer got
_WORD = re.compile(r"\w+")
ALREADY_SENT_NOTICE = ("The customer already got the best answer the knowledge base has; nothing else clears the "
                       "answer threshold.")


@dataclass(frozen=True)
class NearestArticle:
    """An article near the question that did not clear the answer gate: shown, never cited."""

    article_id: int
    title: str
    section: str | None
    similarity: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (also how a draft stores it)."""
        return {"article_id": self.article_id, "title": self.title, "section": self.section,
                "similarity": None if self.similarity is None else round(self.similarity, 4)}


@dataclass(frozen=True)
class Evidence:
    """Articles over the gate (empty if none), solved tickets over their threshold, the notice when no article
    clears the gate, and the nearest articles under it."""

    results: list[SearchResult]
    contents: dict[int, str]
    tickets: list[SimilarTicket]
    notice: str | None
    nearest: list[NearestArticle] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)  # what the customer already got on this ticket

    @property
    def grounded(self) -> bool:
        """Whether anything above its threshold backs a draft."""
        return bool(self.results or self.tickets)

    @property
    def best_article_similarity(self) -> float | None:
        """The best cosine among the articles over the gate (None without one, or with embeddings down)."""
        return max((r.similarity for r in self.results if r.similarity is not None), default=None)


def nothing_above_notice(gate: GateDecision, results: list[SearchResult]) -> str:
    """The line that tells the agent the knowledge base has nothing above the threshold (nearest and score)."""
    if gate.top_similarity is None or not results:
        return f"The knowledge base has nothing above the answer threshold: {gate.reason}."
    best = max((r for r in results if r.similarity is not None), key=lambda r: r.similarity)
    nearest = f"nearest, below the threshold: “{best.section or best.title}” at {gate.top_similarity:.3f}."
    if gate.confidence is not None and gate.threshold is not None and gate.top_similarity >= gate.min_similarity:
        # Over the similarity floor, but the calibrated gate's confidence that this answer is right is too low.
        return (f"The knowledge base has nothing the AI is confident enough to answer with (confidence "
                f"{gate.confidence:.2f}, the answer threshold is {gate.threshold:.2f}); {nearest}")
    return f"The knowledge base has nothing above the answer threshold ({gate.min_similarity:.2f}); {nearest}"


def nearest_articles(results: list[SearchResult]) -> list[NearestArticle]:
    """The best few results under the gate, as the agent sees them."""
    return [NearestArticle(r.id, r.title, r.section, r.similarity) for r in results[:NEAREST_SHOWN]]


def ticket_contexts(tickets: list[SimilarTicket], first_number: int) -> list[ContextArticle]:
    """Solved tickets as numbered references after the articles."""
    return [ContextArticle(first_number + i, f"Solved ticket T-{t.ticket_id}", "Solved ticket",
                           f"Question: {t.question}\n\nThe agent's reply that solved it:\n"
                           f"{t.reply[:TICKET_TEXT_CHARS]}")
            for i, t in enumerate(tickets)]


def mark_ticket_citations(text: str, ticket_numbers: dict[int, int]) -> str:
    """``[n]`` for a solved ticket becomes ``{T-<id>}`` (an agent's evidence, never a public source); article
    numbers stay in their brackets."""
    def replace_numbers(match: re.Match) -> str:
        numbers = [int(part) for part in match.group(1).split(",")]
        kept = [str(n) for n in numbers if n not in ticket_numbers]
        tickets = "".join(f"{{T-{ticket_numbers[n]}}}" for n in numbers if n in ticket_numbers)
        return (f"[{', '.join(kept)}]" if kept else "") + tickets
    return _CITATION.sub(replace_numbers, text)


def already_sent(passage: str, sent: list[str]) -> bool:
    """Whether the customer already got ``passage``: most of its words, in order, are in one sent message."""
    words = _WORD.findall(passage.lower())
    if not words:
        return False
    for message in sent:
        matcher = difflib.SequenceMatcher(None, words, _WORD.findall(message.lower()), autojunk=False)
        if sum(block.size for block in matcher.get_matching_blocks()) >= REPEAT_SHARE * len(words):
            return True
    return False


def sent_to_customer(session: Session, ticket_id: int) -> list[str]:
    """Every answer and reply the customer got on this ticket, oldest first."""
    return list(session.scalars(sa.select(TicketMessage.body).where(
        TicketMessage.ticket_id == ticket_id, TicketMessage.kind.in_(SENT_KINDS)).order_by(TicketMessage.id)))


def known_names(session: Session, tickets: list[SimilarTicket]) -> list[str]:
    """Names a quoted reply may hold: the agents' display names, and the solved tickets' customers' names as far
    as their addresses tell (``anna.smith@…`` → Anna, Smith)."""
    names = [n for n in session.scalars(sa.select(AdminUser.display_name).where(AdminUser.display_name.is_not(None)))]
    emails = session.scalars(sa.select(Ticket.customer_email).where(
        Ticket.id.in_([t.ticket_id for t in tickets]), Ticket.customer_email.is_not(None)))
    for email in emails:
        names += [part for part in re.split(r"[^A-Za-z]+", email.split("@")[0]) if len(part) > 1]
    return names


def _fresh_tickets(session: Session, tickets: list[SimilarTicket], sent: list[str]) -> list[SimilarTicket]:
    """The solved tickets' replies scrubbed of names, greetings and sign-offs, minus what was already sent."""
    names = known_names(session, tickets) if tickets else []
    scrubbed = [replace(t, reply=scrub_reply(t.reply, names=names) or t.reply) for t in tickets]
    return [t for t in scrubbed if not already_sent(t.reply, sent)]


def gather_evidence(session: Session, runtime: Runtime, ticket: Ticket, thread_text: str) -> Evidence:
    """Retrieve for the thread; keep the articles only if they clear the customers' answer gate, and then only those
    at or above its similarity floor (``above_floor``); add the solved tickets at least
    SIMILAR_TICKET_MIN_SIMILARITY close to the question; drop what the customer already got."""
    settings = runtime.settings
    query = ticket_query(ticket.subject, thread_text)
    outcome = run_search(session, runtime.embedder, query, limit=CONTEXT_ARTICLES, weights=runtime.weights,
                         retrieval=runtime.retrieval)
    gate = answer_gate(outcome, settings.answer_min_similarity, query=query, session=session, runtime=runtime)
    sent = sent_to_customer(session, ticket.id)
    found = [t for t in similar_solved_tickets(session, runtime.embedder, ticket, limit=settings.similar_tickets_limit)
             if t.similarity >= settings.similar_ticket_min_similarity]
    tickets = _fresh_tickets(session, found, sent)
    if not gate.answerable:
        return Evidence([], {}, tickets, nothing_above_notice(gate, outcome.results),
                        nearest_articles(outcome.results), sent)
    contents = matched_texts(session, outcome.results)
    relevant = above_floor(outcome.results, settings.answer_min_similarity)  # relevant evidence only
    results = [r for r in relevant if not already_sent(readable(best_passage(contents[r.id], query)), sent)]
    # What is left must clear the same gate on its own: the runner-up of an answer already sent may be far off.
    if len(results) < len(relevant) and not answer_gate(
            replace(outcome, results=results), settings.answer_min_similarity, query=query, session=session,
            runtime=runtime).answerable:
        return Evidence([], {}, tickets, ALREADY_SENT_NOTICE, nearest_articles(results), sent)
    return Evidence(results, {r.id: contents[r.id] for r in results}, tickets, None, sent=sent)
