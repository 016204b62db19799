"""Search use case: embed the query, fetch the exact top-k, point each result at its best section."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from service.providers.embeddings import Embedder, EmbeddingError, embed_padded
from service.retrieval.lexical import build_lexical_query, load_synonym_groups
from service.retrieval.ranking import RankingWeights
from service.retrieval.snippets import (  # noqa: F401  (content_words and make_snippet are part of this module's API)
    Section,
    best_section_by_words,
    content_words,
    make_snippet,
    split_sections,
)
from service.retrieval.sql import RetrievalSettings, count_lexical_matches, search_by_vector, search_fused
from service.validation import clean_search_request

log = logging.getLogger(__name__)
SECTIONED_RESULTS = 5  # only the first results get the (embedding-based) best-section lookup
DEGRADED_EMBEDDING = "embedding unavailable"


@dataclass(frozen=True)
class Explain:
    """How a result was found, with the same keys in every mode (a leg that did not run gives None)."""

    vector_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    matched_terms: list[str]
    headline: str | None
    relevance: float | None
    recency: float
    importance: float
    score: float


@dataclass(frozen=True)
class SearchResult:
    """A ranked article with its score breakdown."""

    id: int
    title: str
    category: str | None
    snippet: str
    similarity: float | None
    recency: float
    importance: float
    score: float
    created_at: datetime
    relevance: float | None = None
    section: str | None = None
    explain: Explain | None = field(default=None, compare=False)

    def to_dict(self, *, explain: bool = False) -> dict[str, Any]:
        """JSON-ready form; the per-leg evidence only with ``explain``."""
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        if not explain:
            data.pop("explain")
        return data


@dataclass(frozen=True)
class SearchOutcome:
    """Results plus how they were found."""

    results: list[SearchResult]
    mode: str
    degraded: str | None = None
    lexical_query: str | None = None
    lexical_match: str | None = None  # "and" (every word matched) or "or" (the fallback)
    all_words_matches: int = 0  # articles matching every word (or a synonym), counted up to the limit
    synonyms_used: list[str] = field(default_factory=list)


def _with_sections(results: list[SearchResult], contents: dict[int, str], query: str,
                   query_vector: np.ndarray | None, embedder: Embedder) -> list[SearchResult]:
    """Point each result's snippet and section label at its best-matching section."""
    wanted: list[tuple[int, list[Section]]] = []
    for index, result in enumerate(results[:SECTIONED_RESULTS]):
        sections = split_sections(contents[result.id])
        if len(sections) > 1:
            wanted.append((index, sections))
    chosen: dict[int, Section] = {}
    if wanted and query_vector is not None:
        texts = [f"{results[i].title}\n{' '.join(s.path)}\n{s.text}" for i, sections in wanted for s in sections]
        try:
            vectors = _embed_sections(embedder, texts)
            scores = iter(vectors @ query_vector / (np.linalg.norm(query_vector) or 1.0))
            for index, sections in wanted:
                section_scores = [next(scores) for _ in sections]
                chosen[index] = sections[int(np.argmax(section_scores))]
        except EmbeddingError as exc:
            log.warning("section embedding failed, choosing sections by words: %s", exc)
    for index, sections in wanted:
        chosen.setdefault(index, best_section_by_words(sections, query))
    updated = []
    for index, result in enumerate(results):
        section = chosen.get(index)
        if section is None:
            updated.append(result)
            continue
        label = section.label(result.title) if section.path else None
        # A full-text headline (matched words in bold) beats a section's first sentences.
        headline = result.explain.headline if result.explain else None
        updated.append(replace(result, snippet=headline or make_snippet(section.text, query), section=label))
    return updated


_section_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_section_cache_lock = threading.Lock()
SECTION_CACHE_SIZE = 4096


def _embed_sections(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Section vectors, from an in-process LRU cache keyed by model and text (articles change rarely)."""
    keys = [(embedder.model_name, text) for text in texts]
    with _section_cache_lock:
        cached = {key: _section_cache[key] for key in keys if key in _section_cache}
        for key in cached:
            _section_cache.move_to_end(key)
    missing = list(dict.fromkeys(key for key in keys if key not in cached))
    if missing:
        fresh = embed_padded(embedder, [text for _, text in missing])
        with _section_cache_lock:
            for key, vector in zip(missing, fresh):
                _section_cache[key] = cached[key] = vector
            while len(_section_cache) > SECTION_CACHE_SIZE:
                _section_cache.popitem(last=False)
    return np.stack([cached[key] for key in keys])


def run_search(session: Session, embedder: Embedder, query: str, *, limit: int = 3,
               weights: RankingWeights = RankingWeights(), retrieval: RetrievalSettings = RetrievalSettings(),
               now: datetime | None = None, source_prefix: str | None = None,
               fallback: bool = True) -> SearchOutcome:
    """Exact top-``limit`` for ``query``; with ``fallback``, a failing embedder degrades to the lexical leg."""
    query, limit = clean_search_request(query, limit)
    now = now or datetime.now(timezone.utc)
    mode, degraded, vector = retrieval.mode, None, None
    if mode != "lexical":
        try:
            vector = embed_padded(embedder, [query])[0]
        except EmbeddingError as exc:
            if not fallback:
                raise
            log.warning("embedding failed at query time, searching by keywords: %s", exc)
            mode, degraded = "lexical", DEGRADED_EMBEDDING
    if mode == "vector":
        rows = search_by_vector(session, vector, model=embedder.model_name, limit=limit, weights=weights,
                                now=now, source_prefix=source_prefix)
        results = [SearchResult(id=r.id, title=r.title, category=r.category, snippet=make_snippet(r.content, query),
                                similarity=r.similarity, recency=r.recency, importance=r.importance,
                                score=r.score, created_at=r.created_at, relevance=r.similarity,
                                explain=Explain(vector_rank=None, lexical_rank=None, lexical_score=None,
                                                matched_terms=[], headline=None, relevance=r.similarity,
                                                recency=r.recency, importance=r.importance, score=r.score))
                   for r in rows]
        contents = {r.id: r.content for r in rows}
        return SearchOutcome(_with_sections(results, contents, query, vector, embedder), mode)
    return _search_with_lexical_leg(session, embedder, query, vector, limit=limit, weights=weights,
                                    retrieval=retrieval, mode=mode, degraded=degraded, now=now,
                                    source_prefix=source_prefix)


def _search_with_lexical_leg(session: Session, embedder: Embedder, query: str, vector: np.ndarray | None, *,
                             limit: int, weights: RankingWeights, retrieval: RetrievalSettings, mode: str,
                             degraded: str | None, now: datetime, source_prefix: str | None) -> SearchOutcome:
    """Lexical or hybrid: AND query first, OR query when AND finds fewer than ``limit`` articles."""

    # Bounded: a query of common words must not hold a connection for long.
    previous_timeout = session.execute(text("SELECT current_setting('statement_timeout')")).scalar_one()
    session.execute(text("SELECT set_config('statement_timeout', :ms, true)"),
                    {"ms": str(retrieval.statement_timeout_ms)})
    lexical = build_lexical_query(session, query, load_synonym_groups(session))
    tsquery, match, and_matches = lexical.and_query, "and", 0
    if tsquery:
        and_matches = count_lexical_matches(session, tsquery, model=embedder.model_name, enough=limit,
                                            source_prefix=source_prefix)
        if and_matches < limit:
            tsquery, match = lexical.or_query, "or"
    fusion = replace(retrieval, mode=mode)  # "lexical" when the embedder is down
    rows = search_fused(session, vector, tsquery, lexical.lexemes, model=embedder.model_name, limit=limit,
                        weights=weights, fusion=fusion, now=now, source_prefix=source_prefix,
                        and_tsquery=lexical.and_query)
    session.execute(text("SELECT set_config('statement_timeout', :previous, true)"),
                    {"previous": previous_timeout})
    results = [SearchResult(
        id=r.id, title=r.title, category=r.category, snippet=r.headline or make_snippet(r.content, query),
        similarity=r.similarity, recency=r.recency, importance=r.importance, score=r.score,
        created_at=r.created_at, relevance=r.relevance,
        explain=Explain(vector_rank=r.vector_rank, lexical_rank=r.lexical_rank, lexical_score=r.lexical_score,
                        matched_terms=r.matched_terms, headline=r.headline, relevance=r.relevance,
                        recency=r.recency, importance=r.importance, score=r.score),
    ) for r in rows]
    contents = {r.id: r.content for r in rows}
    return SearchOutcome(_with_sections(results, contents, query, vector, embedder), mode, degraded,
                         lexical_query=tsquery, lexical_match=match if tsquery else None,
                         all_words_matches=and_matches,
                         synonyms_used=lexical.synonyms_used)


def search_knowledge(session: Session, embedder: Embedder, query: str, *, limit: int = 3,
                     weights: RankingWeights = RankingWeights(), now: datetime | None = None,
                     source_prefix: str | None = None,
                     retrieval: RetrievalSettings = RetrievalSettings()) -> list[SearchResult]:
    """Exact top-``limit`` articles for ``query``; raises EmbeddingError if the embedder fails.

    ``source_prefix`` keeps only articles imported from files under that path.
    """
    return run_search(session, embedder, query, limit=limit, weights=weights, retrieval=retrieval, now=now,
                      source_prefix=source_prefix, fallback=False).results
