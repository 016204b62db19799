"""Answering a ticket: store it first, retrieve, gate, draft (LLM or extractive), store the answer.

Unlike the other use cases this one commits, on purpose: the ticket must be
durable before any slow or failing call, and each later step is its own unit of work.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa

from sqlalchemy.orm import Session

from service.db.models import Article, Ticket, TicketAnswer, TicketCitation, TicketMessage
from service.gate.evidence import gather_features
from service.gate.memory import find_review_match
from service.gate.state import active_gate, confidence_of
from service.knowledge.sections import PATH_SEPARATOR as SECTION_SEPARATOR
from service.providers.llm import ChatModel, LLMError
from service.retrieval.search import DEGRADED_EMBEDDING, SearchOutcome, SearchResult, run_search
from service.runtime import Runtime
from service.tickets.answering import (
    HANDOFF_MESSAGE,
    ContextArticle,
    GateDecision,
    above_floor,
    best_above_floor,
    build_messages,
    decide_answerability,
    decide_answerability_by_keywords,
    extractive_answer,
    fit_to_budget,
    parse_citations,
    says_cannot_answer,
    strip_invalid_citations,
    ticket_query,
)
from service.tickets.similar import remember_ticket_question
from service.tickets.notifications import notify_unassigned
from service.tickets.states import SYSTEM, apply_event
from service.tickets.thread import add_message
from service.tickets.validation import clean_ticket_fields

log = logging.getLogger(__name__)
CONTEXT_ARTICLES = 3


@dataclass
class Draft:
    """An answer in the making."""

    answer: str
    mode: str  # "llm" | "extractive" | "none"
    status: str  # "answered" | "needs_agent"
    reason: str
    cited: list[int] = field(default_factory=list)  # 1-based positions among the retrieved articles
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    llm_ms: float | None = None
    error: str | None = None


def _handoff(reason: str, error: str | None = None) -> Draft:
    return Draft(answer=HANDOFF_MESSAGE, mode="none", status="needs_agent", reason=reason, error=error)


def _extractive(results: list[SearchResult], contents: dict[int, str], query: str, reason: str, *,
                floor: float, error: str | None = None) -> Draft:
    """Quote the best-ranked article at or above the relevance floor, cited by its rank."""
    found = best_above_floor(results, floor)
    if found is None:  # the gate let nothing relevant through (it should not): hand off rather than quote
        return _handoff("no retrieved article reaches the similarity floor", error=error)
    rank, best = found
    section = SECTION_SEPARATOR.join(best.section_path) or None
    return Draft(answer=extractive_answer(best.title, contents[best.id], query, section), mode="extractive",
                 status="answered", reason=reason, cited=[rank], error=error)


def context_articles(results: list[SearchResult], contents: dict[int, str],
                     budget_chars: int, floor: float | None = None) -> list[ContextArticle]:
    """The matched section of each retrieved article, in rank order, within the context budget; with ``floor``,
    only the articles at or above it (``above_floor``), each still numbered by its rank, so ``[n]`` is rank n."""
    numbered = list(enumerate(results, start=1))
    if floor is not None:
        kept = {id(r) for r in above_floor(results, floor)}
        numbered = [(rank, r) for rank, r in numbered if id(r) in kept]
    texts = fit_to_budget([contents[r.id] for _, r in numbered], budget_chars)
    return [ContextArticle(rank, r.title, r.category, text, SECTION_SEPARATOR.join(r.section_path) or None)
            for (rank, r), text in zip(numbered, texts)]


def _llm_draft(chat: ChatModel, results: list[SearchResult], contents: dict[int, str],
               subject: str, body: str, budget_chars: int, floor: float | None = None) -> Draft:
    """Ask the model; a refusal hands off, a failure or an uncited answer falls back to extractive. Articles
    below ``floor`` are not shown to the model (they keep their rank: the others' numbers do not move)."""
    context = context_articles(results, contents, budget_chars, floor)
    results = results[:context[-1].number]
    quote_floor = -1.0 if floor is None else floor  # below any cosine: every result may be quoted
    shown = {article.number for article in context}
    query = ticket_query(subject, body)
    try:
        reply = chat.complete(build_messages(context, subject, body))
    except LLMError as exc:
        log.warning("LLM failed, answering extractively: %s", exc)
        return _extractive(results, contents, query, "the language model failed; quoted the best article",
                           floor=quote_floor, error=str(exc))
    usage = {"model": reply.model, "prompt_tokens": reply.prompt_tokens,
             "completion_tokens": reply.completion_tokens, "llm_ms": reply.latency_ms}
    if says_cannot_answer(reply.text):
        draft = _handoff("the model said the articles do not answer the ticket")
        draft.mode = "llm"
        vars(draft).update(usage)
        return draft
    valid, invalid = parse_citations(reply.text, len(results))
    invalid += [n for n in valid if n not in shown]  # a number the model was never given
    valid = [n for n in valid if n in shown]
    if not valid:
        draft = _extractive(results, contents, query, "the model's answer cited no supplied article; "
                            "quoted the best article instead", floor=quote_floor,
                            error=f"uncited answer: {reply.text[:200]}")
        vars(draft).update(usage)
        return draft
    reason = "answered by the model from the cited articles"
    if invalid:
        reason += f"; removed citations to unknown articles {invalid}"
    return Draft(answer=strip_invalid_citations(reply.text, len(results)), mode="llm", status="answered",
                 reason=reason, cited=valid, **usage)


def answer_gate(outcome: SearchOutcome, min_similarity: float, *, query: str | None = None,
                session: Session | None = None, runtime: Runtime | None = None) -> GateDecision:
    """Whether the retrieved articles may answer: the best cosine reaches the floor (every word must match when
    the embedder is down and there is no cosine to gate on); given the query, a session and the runtime, the
    calibrated confidence must also reach the threshold in force (issue 34; ANSWER_GATE=floor turns that off).
    Every path that answers or drafts calls this one function."""
    if outcome.degraded == DEGRADED_EMBEDDING:
        return decide_answerability_by_keywords(len(outcome.results), outcome.all_words_matches > 0)
    decision = decide_answerability([r.similarity for r in outcome.results if r.similarity is not None],
                                    min_similarity)
    if query is None or session is None or runtime is None or runtime.settings.answer_gate != "calibrated":
        return decision
    features = gather_features(session, runtime.embedder, query, outcome, floor=min_similarity,
                               weights=runtime.weights, retrieval=runtime.retrieval)
    gate = active_gate(session)
    confidence = confidence_of(features, gate)
    decided = replace(decision, confidence=confidence, threshold=gate.threshold, calibration=gate.source,
                      features=features.to_dict() if features else None)
    if not decision.answerable or confidence is None:
        return decided
    match = find_review_match(session, runtime.embedder, query, outcome.results[0].id,
                              min_similarity=runtime.settings.review_match_similarity)
    if match is not None:
        judged = "right" if match.answer_correct else "wrong"
        reason = (f"a reviewer marked this article's answer {judged} for a question like this one (ticket "
                  f"#{match.ticket_id}, similarity {match.similarity:.2f}); confidence {confidence:.3f}")
        decided = replace(decided, review_match=match.to_dict())
        if not match.answer_correct:
            return replace(decided, answerable=False, reason=reason)
        return replace(decided, reason=f"{reason}; {decision.reason}")
    verdict = "reaches" if confidence >= gate.threshold else "is below"
    reason = f"confidence {confidence:.3f} {verdict} the threshold {gate.threshold:.3f} ({gate.source} calibration)"
    if confidence < gate.threshold:
        return replace(decided, answerable=False, reason=reason)
    return replace(decided, reason=f"{reason}; {decision.reason}")


def matched_texts(session, results: list[SearchResult]) -> dict[int, str]:
    """Each result's matched section; the whole article only for one without sections (not yet re-embedded)."""
    texts = {r.id: r.section_text for r in results if r.section_text}
    missing = [r.id for r in results if r.id not in texts]
    if missing:
        texts.update(session.execute(sa.select(Article.id, Article.content).where(Article.id.in_(missing))).all())
    return texts


def _store(session, ticket_id: int, draft: Draft, results: list[SearchResult], gate: dict[str, Any],
           retrieval_ms: float | None, started: float, first_response_hours: float) -> bool:
    ticket = session.get(Ticket, ticket_id, with_for_update=True, populate_existing=True)
    if ticket.status != "received":  # answered meanwhile (a slow first answer and recovery's): keep the first
        return False
    ticket.status, ticket.gate, ticket.answered_at = draft.status, gate, sa.func.now()
    if draft.status == "answered":
        channel = session.scalar(sa.select(TicketMessage.channel).where(TicketMessage.ticket_id == ticket_id)
                                 .order_by(TicketMessage.id).limit(1)) or "api"
        add_message(session, ticket_id, "ai_answer", draft.answer, channel=channel)  # answered where asked
    elif ticket.customer_email:  # a hand-off with an address to reply to: a person takes it
        apply_event(session, ticket, "escalated", SYSTEM, first_response_hours=first_response_hours)
    session.add(TicketAnswer(
        ticket_id=ticket_id, answer=draft.answer, mode=draft.mode, reason=draft.reason, model=draft.model,
        prompt_tokens=draft.prompt_tokens, completion_tokens=draft.completion_tokens,
        retrieval_ms=retrieval_ms, llm_ms=draft.llm_ms, latency_ms=(time.perf_counter() - started) * 1000,
        error=draft.error,
    ))
    for rank, result in enumerate(results, start=1):
        session.add(TicketCitation(
            ticket_id=ticket_id, article_id=result.id, article_title=result.title, rank=rank,
            cited=rank in draft.cited, similarity=result.similarity, recency=result.recency,
            importance=result.importance, score=result.score, section_label=result.section,
            section_similarity=result.section_similarity,
        ))
    return True


def answer_ticket(runtime: Runtime, chat: ChatModel | None, fields: dict[str, Any], *,
                  secret_sha256: str | None = None, channel: str = "api",
                  email_message_id: str | None = None) -> int:
    """Store, answer and record a ticket; returns its id. Only invalid input raises.

    ``secret_sha256`` is the digest of the secret the caller hands to the submitter (see tickets.secrets);
    ``channel`` and ``email_message_id`` describe how the question came in (the thread's first message).
    """
    cleaned = clean_ticket_fields(fields)
    started = time.perf_counter()
    with runtime.session() as session:
        ticket = Ticket(**cleaned, status="received", secret_sha256=secret_sha256,
                        ack_pending=cleaned.get("customer_email") is not None)  # owed with the stored ticket
        session.add(ticket)
        session.flush()
        ticket_id = ticket.id
        add_message(session, ticket_id, "customer", cleaned["body"], channel=channel,
                    email_message_id=email_message_id)
    finish_ticket(runtime, chat, ticket_id, cleaned["subject"], cleaned["body"], started=started)
    return ticket_id


def finish_ticket(runtime: Runtime, chat: ChatModel | None, ticket_id: int, subject: str, body: str, *,
                  started: float) -> None:
    """Answer a stored ticket, or record why that failed on it: no ticket is ever left without an outcome."""
    try:
        _answer_stored_ticket(runtime, chat, ticket_id, subject, body, started)
    except Exception as exc:  # never lose the ticket: record the failure on it
        _record_failure(runtime, ticket_id, exc)
    _remember_question(runtime, ticket_id)


def _remember_question(runtime: Runtime, ticket_id: int) -> None:
    """Embed the answered or escalated question for "similar solved tickets" (the search's vector, cached)."""
    try:
        with runtime.session() as session:
            gate = session.get(Ticket, ticket_id).gate or {}
            if gate.get("degraded") == DEGRADED_EMBEDDING:
                return  # the embedder just failed: not again now; the solve embeds it (ensure_ticket_question)
            remember_ticket_question(session, runtime.embedder, ticket_id)
    except Exception:  # noqa: BLE001 - evidence for agents, never a reason to fail the ticket
        log.exception("ticket %s: question not stored for similar tickets", ticket_id)


def _record_failure(runtime: Runtime, ticket_id: int, exc: Exception) -> None:
    """Mark the ticket failed (and escalate it when the customer can be answered by e-mail)."""
    log.error("answering ticket %s failed", ticket_id, exc_info=exc)
    with runtime.session() as session:
        failed = session.get(Ticket, ticket_id, with_for_update=True, populate_existing=True)
        if failed.status != "received":  # another sweeper answered it meanwhile
            return
        failed.status = "failed"
        if failed.customer_email:
            apply_event(session, failed, "escalated", SYSTEM,
                        first_response_hours=runtime.settings.first_response_hours)
        session.add(TicketAnswer(ticket_id=ticket_id, answer=HANDOFF_MESSAGE, mode="none",
                                 reason="internal error while answering", error=f"{type(exc).__name__}: {exc}"))
        # Nobody may stay unaware of a ticket the service could not answer: the team hears of it.
        notify_unassigned(session, runtime.settings, failed, why="Answering failed (an internal error)")


def _answer_stored_ticket(runtime: Runtime, chat: ChatModel | None, ticket_id: int, subject: str, body: str,
                          started: float) -> None:
    query = ticket_query(subject, body)
    with runtime.session() as session:
        retrieval_started = time.perf_counter()
        outcome = run_search(session, runtime.embedder, query, limit=CONTEXT_ARTICLES, weights=runtime.weights,
                             retrieval=runtime.retrieval)
        results = outcome.results
        retrieval_ms = (time.perf_counter() - retrieval_started) * 1000
        gate = answer_gate(outcome, runtime.settings.answer_min_similarity, query=query, session=session,
                           runtime=runtime)
        contents = matched_texts(session, results)
    gate_record = gate.to_dict() | ({"degraded": outcome.degraded} if outcome.degraded else {})
    if not gate.answerable:
        draft = _handoff(gate.reason)
        if outcome.degraded:
            draft.error = outcome.degraded
    elif chat is None:
        draft = _extractive(results, contents, query, "no language model is configured; quoted the best article",
                            floor=runtime.settings.answer_min_similarity)
    else:
        draft = _llm_draft(chat, results, contents, subject, body, runtime.settings.llm_context_chars,
                           floor=runtime.settings.answer_min_similarity)
    with runtime.session() as session:
        if _store(session, ticket_id, draft, results, gate_record, retrieval_ms, started,
                  runtime.settings.first_response_hours):
            notify_unassigned(session, runtime.settings, session.get(Ticket, ticket_id))  # a hand-off opened it
