"""The widget's answer as a stream of events: the gate decision, text deltas, then the citations.

Retrieval and the gate are exactly the tickets' (``run_search`` and ``workflow.answer_gate``), called in one place,
``answer_events``, so a change to either reaches the widget too. The text is the model's tokens (an
OpenAI-compatible server with ``stream=True``) or the extractive answer in pieces.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from service.knowledge.sections import PATH_SEPARATOR as SECTION_SEPARATOR
from service.providers.llm import ChatModel
from service.retrieval.search import SearchResult, run_search
from service.runtime import Runtime
from service.tickets.answering import (
    CANNOT_ANSWER,
    ContextArticle,
    best_above_floor,
    build_messages,
    extractive_answer,
    parse_citations,
    says_cannot_answer,
)
from service.tickets.workflow import CONTEXT_ARTICLES, answer_gate, context_articles, matched_texts
from service.validation import QUERY_MAX

log = logging.getLogger(__name__)
PIECE_WORDS = 4  # words per delta of an extractive answer


@dataclass(frozen=True)
class AnswerEvent:
    """One server-sent event: ``gate``, ``delta``, ``citations`` or ``done``."""

    kind: str
    data: dict[str, Any]


@dataclass
class AnswerRecord:
    """What was sent, to store with the conversation once the stream ends."""

    text: str = ""
    gate: dict[str, Any] = field(default_factory=dict)
    citations: list[dict[str, Any]] = field(default_factory=list)
    answered: bool = False
    refused: bool = False  # the model said the articles do not answer: hand off, as a ticket would


def follow_up_query(question: str, earlier: list[str]) -> str:
    """The retrieval query: the question after the visitor's previous one, so "and how long?" keeps its topic."""
    return "\n\n".join([*earlier[-1:], question])[:QUERY_MAX]


def split_into_pieces(text: str, words: int = PIECE_WORDS) -> list[str]:
    """The text in pieces of a few words each (whitespace kept), which joined give the text back."""
    tokens = re.findall(r"\S+\s*|\s+", text)
    return ["".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]


def may_become_refusal(text: str) -> bool:
    """Whether the model's first characters could still turn into its CANNOT_ANSWER sentinel (then hold them)."""
    start = re.sub(r"^[\W_]+", "", text).upper()
    return CANNOT_ANSWER.startswith(start[:len(CANNOT_ANSWER)]) if start else True


def stream_model(chat: ChatModel, messages: list[dict[str, str]]) -> Iterator[str]:
    """The model's reply as it is generated, through the OpenAI-compatible client's ``stream=True``."""
    client = getattr(chat, "client", None)
    if client is None:  # a model without a streaming client: its whole reply as one piece
        yield chat.complete(messages).text
        return
    stream = client.chat.completions.create(model=chat.model_name, messages=messages, stream=True,
                                            temperature=getattr(chat, "temperature", None),
                                            max_tokens=getattr(chat, "max_tokens", None))
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


def _citations(results: list[SearchResult], numbers: list[int]) -> list[dict[str, Any]]:
    return [{"number": n, "article_id": results[n - 1].id, "title": results[n - 1].title,
             "section": results[n - 1].section} for n in numbers]


def cited_among(text: str, shown: list[int]) -> list[int]:
    """The citations in ``text`` to the articles the model was shown (numbered by rank: not always 1..n)."""
    valid, _ = parse_citations(text, max(shown, default=0))
    return [n for n in valid if n in shown]


def _model_events(chat: ChatModel, results: list[SearchResult], context: list[ContextArticle], question: str,
                  earlier: list[str], record: AnswerRecord) -> Iterator[AnswerEvent]:
    """Stream the model's tokens; hold back only a start that could still be its CANNOT_ANSWER refusal."""
    conversation = "".join(f"Earlier question: {q}\n" for q in earlier) + question
    held, released = "", False
    for piece in stream_model(chat, build_messages(context, question[:120], conversation)):
        if released:
            record.text += piece
            yield AnswerEvent("delta", {"text": piece})
            continue
        held += piece
        if not may_become_refusal(held) or len(held.strip()) > len(CANNOT_ANSWER) + 2:
            if says_cannot_answer(held):
                record.refused = True
                return
            released = True
            record.text = held
            yield AnswerEvent("delta", {"text": held})
    if not released and says_cannot_answer(held):
        record.refused = True
        return
    if not released and held.strip():
        record.text = held
        yield AnswerEvent("delta", {"text": held})
    record.citations = _citations(results, cited_among(record.text, [article.number for article in context]))
    record.answered = bool(record.text)


def answer_events(runtime: Runtime, question: str, earlier: list[str], record: AnswerRecord,
                  handoff_text: str) -> Iterator[AnswerEvent]:
    """Retrieve, gate, then stream the answer; ``record`` holds what was sent when the iterator is spent."""
    query = follow_up_query(question, earlier)
    with runtime.session() as session:  # closed before any slow model call
        outcome = run_search(session, runtime.embedder, query, limit=CONTEXT_ARTICLES, weights=runtime.weights,
                             retrieval=runtime.retrieval)
        gate = answer_gate(outcome, runtime.settings.answer_min_similarity, query=query, session=session,
                           runtime=runtime)
        contents = matched_texts(session, outcome.results) if gate.answerable else {}
    record.gate = gate.to_dict() | ({"degraded": outcome.degraded} if outcome.degraded else {})
    yield AnswerEvent("gate", record.gate)
    results = outcome.results
    if gate.answerable and runtime.chat is not None:
        # The model sees only the articles at or above the floor, each numbered by its rank (as a ticket's does).
        context = context_articles(results, contents, runtime.settings.llm_context_chars,
                                   runtime.settings.answer_min_similarity)
        try:
            yield from _model_events(runtime.chat, results, context, question, earlier, record)
        except Exception as exc:  # noqa: BLE001 - the SDK raises many types; quote the article instead
            log.warning("widget: streaming model failed, answering extractively: %s", exc)
            if record.text:
                record.citations = _citations(results, cited_among(record.text, [a.number for a in context]))
                yield AnswerEvent("citations", {"citations": record.citations})
                return
    found = best_above_floor(results, runtime.settings.answer_min_similarity)  # never quote the irrelevant
    if gate.answerable and not record.text and not record.refused and found is not None:
        rank, best = found
        record.text = extractive_answer(best.title, contents[best.id], query,
                                        SECTION_SEPARATOR.join(best.section_path) or None)
        record.citations, record.answered = _citations(results, [rank]), True
        for piece in split_into_pieces(record.text):
            yield AnswerEvent("delta", {"text": piece})
    if not record.text:
        record.text = handoff_text
        yield AnswerEvent("delta", {"text": handoff_text})
    yield AnswerEvent("citations", {"citations": record.citations})
