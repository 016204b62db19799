"""Search use case: embed the query, fetch the exact top-k with each article's matched section."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from service.db.engine import READ_REPLICA
from service.db.snapshot import read_snapshot
from service.knowledge.sections import PATH_SEPARATOR
from service.providers.embeddings import Embedder, EmbeddingError, embed_narrow
from service.retrieval.bm25 import build_bm25_query
from service.retrieval.lexical import load_synonym_groups
from service.retrieval.ranking import RankingWeights, relevance_kind
from service.retrieval.snippets import content_words, make_snippet  # noqa: F401  (part of this module's API)
from service.retrieval.sql import (
    RankedRow,
    RetrievalSettings,
    count_lexical_matches,
    is_approximate,
    rank_articles,
)
from service.validation import clean_search_request

log = logging.getLogger(__name__)
DEGRADED_EMBEDDING = "embedding unavailable"
DEGRADED_LEXICAL = "keyword search timed out"
QUERY_CANCELED = "57014"  # SQLSTATE of a statement cut off by statement_timeout


@dataclass(frozen=True)
class Explain:
    """How a result was found, with the same keys in every mode (a leg that did not run gives None; in lexical
    mode the cosine is reported but not ranked, so ``vector_rank`` is None)."""

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
    """A ranked article with its score breakdown and the section that matched."""

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
    # What ``relevance`` is (service.retrieval.ranking.RELEVANCE_KINDS): "similarity" in vector mode, where it is
    # the cosine and ``score = 0.8×similarity + 0.2×recency×importance`` checks by hand; "fused relevance" in hybrid.
    relevance_kind: str = "similarity"
    section: str | None = None  # "Title › Heading" of the matched section; None for the lead
    section_path: tuple[str, ...] = ()
    section_similarity: float | None = None
    section_id: int | None = None
    section_text: str | None = field(default=None, repr=False)
    explain: Explain | None = field(default=None, compare=False)

    def to_dict(self, *, explain: bool = False) -> dict[str, Any]:
        """JSON-ready form; the per-leg evidence only with ``explain``."""
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        data["section_path"] = list(self.section_path)
        data.pop("section_text")
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
    exact: bool = True  # False: the opt-in approximate mode ranked HNSW candidates (service.retrieval.approximate)


def _to_result(row: RankedRow, query: str, mode: str) -> SearchResult:
    """A ranked row as a result of a ``mode`` search: the snippet comes from the matched section."""
    label = PATH_SEPARATOR.join((row.title, *row.section_path)) if row.section_path else None
    snippet = row.headline or make_snippet(row.section_text or "", query)
    return SearchResult(
        id=row.id, title=row.title, category=row.category, snippet=snippet, similarity=row.similarity,
        recency=row.recency, importance=row.importance, score=row.score, created_at=row.created_at,
        relevance=row.relevance, relevance_kind=relevance_kind(mode), section=label, section_path=row.section_path,
        section_similarity=row.section_similarity, section_id=row.section_id, section_text=row.section_text,
        explain=Explain(vector_rank=row.vector_rank, lexical_rank=row.lexical_rank, lexical_score=row.lexical_score,
                        matched_terms=row.matched_terms, headline=row.headline, relevance=row.relevance,
                        recency=row.recency, importance=row.importance, score=row.score),
    )


def run_search(session: Session, embedder: Embedder, query: str, *, limit: int = 3,
               weights: RankingWeights = RankingWeights(), retrieval: RetrievalSettings = RetrievalSettings(),
               now: datetime | None = None, source_prefix: str | None = None,
               fallback: bool = True) -> SearchOutcome:
    """Exact top-``limit`` for ``query``; with ``fallback``, a failing embedder degrades to the lexical leg.

    The query is embedded in every mode when the embedder works: in lexical mode the cosine does not rank,
    but results still report it (the answerability gate needs it).
    """
    query, limit = clean_search_request(query, limit)
    now = now or datetime.now(timezone.utc)
    mode, degraded, vector = retrieval.mode, None, None
    try:
        vector = embed_narrow(embedder, [query])[0]
    except EmbeddingError as exc:
        if not fallback:
            raise
        log.warning("embedding failed at query time, searching by keywords: %s", exc)
        mode, degraded = "lexical", DEGRADED_EMBEDDING
    with read_snapshot(session):  # the count, the ranking and a timed-out leg's retry read the same rows
        return _search_statements(session, embedder, query, vector, limit=limit, weights=weights,
                                  retrieval=retrieval, mode=mode, degraded=degraded, now=now,
                                  source_prefix=source_prefix)


def _search_statements(session: Session, embedder: Embedder, query: str, vector: np.ndarray | None, *,
                       limit: int, weights: RankingWeights, retrieval: RetrievalSettings, mode: str,
                       degraded: str | None, now: datetime, source_prefix: str | None) -> SearchOutcome:
    """The search's statements for an embedded (or degraded) query, by mode."""
    if mode == "vector":
        rows = rank_articles(session, vector, model=embedder.model_name, limit=limit, weights=weights,
                             retrieval=retrieval, now=now, source_prefix=source_prefix)
        return SearchOutcome([_to_result(row, query, mode) for row in rows], mode,
                             exact=not is_approximate(retrieval, with_vector=True))
    return _search_with_lexical_leg(session, embedder, query, vector, limit=limit, weights=weights,
                                    retrieval=retrieval, mode=mode, degraded=degraded, now=now,
                                    source_prefix=source_prefix)


# Where the search statements run (the read replica, if any): the timeout must bound them there.
CURRENT_TIMEOUT_SQL = text("SELECT current_setting('statement_timeout')").execution_options(**{READ_REPLICA: True})
SET_TIMEOUT_SQL = text("SELECT set_config('statement_timeout', :ms, true)").execution_options(**{READ_REPLICA: True})


def _search_with_lexical_leg(session: Session, embedder: Embedder, query: str, vector: np.ndarray | None, *,
                             limit: int, weights: RankingWeights, retrieval: RetrievalSettings, mode: str,
                             degraded: str | None, now: datetime, source_prefix: str | None) -> SearchOutcome:
    """Lexical or hybrid: BM25 over the articles that match any of the query's (deduplicated, capped) terms.

    ``lexical_match`` says whether at least ``limit`` articles match every term ("and") or not ("or").
    """
    # Bounded: a query of common words must not hold a connection for long.
    previous_timeout = session.execute(CURRENT_TIMEOUT_SQL).scalar_one()
    session.execute(SET_TIMEOUT_SQL, {"ms": str(retrieval.statement_timeout_ms)})
    lexical = build_bm25_query(session, query, load_synonym_groups(session))
    and_matches = 0
    if lexical.all_terms:
        and_matches = count_lexical_matches(session, lexical.all_terms, model=embedder.model_name, enough=limit,
                                            source_prefix=source_prefix)
    rows: list[RankedRow] = []
    if lexical.any_term or mode == "hybrid":
        fused = replace(retrieval, mode=mode)  # the mode may have degraded to lexical
        try:
            with session.begin_nested():  # a cancelled statement spoils only this savepoint
                rows = rank_articles(session, vector, model=embedder.model_name, limit=limit, weights=weights,
                                     retrieval=fused, now=now, tsquery=lexical.any_term,
                                     and_tsquery=lexical.all_terms, lexemes=lexical.terms,
                                     source_prefix=source_prefix)
        except OperationalError as exc:
            if mode != "hybrid" or getattr(exc.orig, "sqlstate", None) != QUERY_CANCELED:
                raise
            # A query of only common words can take BM25 past the timeout on a large base: the vector leg
            # alone still answers (exactly, and fast), and the outcome says what was left out.
            log.warning("hybrid search timed out in its keyword leg; answering by vector alone")
            session.execute(SET_TIMEOUT_SQL, {"ms": previous_timeout})
            rows = rank_articles(session, vector, model=embedder.model_name, limit=limit, weights=weights,
                                 retrieval=replace(retrieval, mode="vector"), now=now, source_prefix=source_prefix)
            mode, degraded = "vector", DEGRADED_LEXICAL
    session.execute(SET_TIMEOUT_SQL, {"ms": previous_timeout})
    match = ("and" if and_matches >= limit else "or") if lexical.any_term else None
    return SearchOutcome([_to_result(row, query, mode) for row in rows], mode, degraded,
                         lexical_query=lexical.any_term, lexical_match=match,
                         all_words_matches=and_matches, synonyms_used=lexical.synonyms_used)


def search_knowledge(session: Session, embedder: Embedder, query: str, *, limit: int = 3,
                     weights: RankingWeights = RankingWeights(), now: datetime | None = None,
                     source_prefix: str | None = None,
                     retrieval: RetrievalSettings = RetrievalSettings()) -> list[SearchResult]:
    """Exact top-``limit`` articles for ``query``; raises EmbeddingError if the embedder fails.

    ``source_prefix`` keeps only articles imported from files under that path.
    """
    return run_search(session, embedder, query, limit=limit, weights=weights, retrieval=retrieval, now=now,
                      source_prefix=source_prefix, fallback=False).results


def lexical_ranking(session: Session, embedder: Embedder, query: str, *, limit: int = 10,
                    weights: RankingWeights = RankingWeights(),
                    retrieval: RetrievalSettings = RetrievalSettings()) -> list[tuple[int, float]]:
    """The lexical leg alone, without embedding: (article id, BM25 score) in rank order (the answer gate's
    second opinion, service.gate.features)."""
    query, limit = clean_search_request(query, limit)
    outcome = _search_with_lexical_leg(session, embedder, query, None, limit=limit, weights=weights,
                                       retrieval=replace(retrieval, mode="lexical"), mode="lexical", degraded=None,
                                       now=datetime.now(timezone.utc), source_prefix=None)
    return [(r.id, r.explain.lexical_score or 0.0) for r in outcome.results if r.explain]
