"""What an agent's draft may rest on (issue 25 items 2 and 3): the articles that clear the answer gate, and the
solved tickets close enough to the question. Pure helpers for the references and the "nothing above the
threshold" notice, and the one read that gathers both."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.db.models import Ticket
from service.retrieval.search import SearchResult, run_search
from service.runtime import Runtime
from service.tickets.answering import ContextArticle, GateDecision, above_floor, ticket_query
from service.tickets.similar import SimilarTicket, similar_solved_tickets
from service.tickets.workflow import CONTEXT_ARTICLES, answer_gate, matched_texts

_CITATION = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
TICKET_TEXT_CHARS = 1500  # of a solved ticket's reply, in the model's context


@dataclass(frozen=True)
class Evidence:
    """Articles over the gate (empty if none), solved tickets over their threshold, and the notice when no
    article clears the gate."""

    results: list[SearchResult]
    contents: dict[int, str]
    tickets: list[SimilarTicket]
    notice: str | None

    @property
    def grounded(self) -> bool:
        """Whether anything above its threshold backs a draft."""
        return bool(self.results or self.tickets)


def nothing_above_notice(gate: GateDecision, results: list[SearchResult]) -> str:
    """The line that tells the agent the knowledge base has nothing above the threshold (best match and score)."""
    if gate.top_similarity is None or not results:
        return f"The knowledge base has nothing above the answer threshold: {gate.reason}."
    best = max((r for r in results if r.similarity is not None), key=lambda r: r.similarity)
    return (f"The knowledge base has nothing above the answer threshold ({gate.min_similarity:.2f}): "
            f"the best match is “{best.section or best.title}” at {gate.top_similarity:.3f}.")


def ticket_contexts(tickets: list[SimilarTicket], first_number: int) -> list[ContextArticle]:
    """Solved tickets as numbered references after the articles."""
    return [ContextArticle(first_number + i, f"Solved ticket T-{t.ticket_id}", "Solved ticket",
                           f"Question: {t.question}\n\nThe agent's reply that solved it:\n"
                           f"{t.reply[:TICKET_TEXT_CHARS]}")
            for i, t in enumerate(tickets)]


def mark_ticket_citations(text: str, ticket_numbers: dict[int, int]) -> str:
    """``[n]`` for a solved ticket becomes ``{T-<id>}`` (an agent's evidence, never a public source); article
    numbers stay in their brackets."""
    def replace(match: re.Match) -> str:
        numbers = [int(part) for part in match.group(1).split(",")]
        kept = [str(n) for n in numbers if n not in ticket_numbers]
        tickets = "".join(f"{{T-{ticket_numbers[n]}}}" for n in numbers if n in ticket_numbers)
        return (f"[{', '.join(kept)}]" if kept else "") + tickets
    return _CITATION.sub(replace, text)


def gather_evidence(session: Session, runtime: Runtime, ticket: Ticket, thread_text: str) -> Evidence:
    """Retrieve for the thread; keep the articles only if they clear the customers' answer gate, and then only those
    at or above its similarity floor (``above_floor``); add the solved
    tickets at least SIMILAR_TICKET_MIN_SIMILARITY close to the question."""
    settings = runtime.settings
    outcome = run_search(session, runtime.embedder, ticket_query(ticket.subject, thread_text),
                         limit=CONTEXT_ARTICLES, weights=runtime.weights, retrieval=runtime.retrieval)
    gate = answer_gate(outcome, settings.answer_min_similarity)
    tickets = [t for t in similar_solved_tickets(session, runtime.embedder, ticket, limit=settings.similar_tickets_limit)
               if t.similarity >= settings.similar_ticket_min_similarity]
    if not gate.answerable:
        return Evidence([], {}, tickets, nothing_above_notice(gate, outcome.results))
    results = above_floor(outcome.results, settings.answer_min_similarity)  # relevant evidence only
    return Evidence(results, matched_texts(session, results), tickets, None)

