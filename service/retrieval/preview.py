"""Ranking preview for the admin page: the top results for a sample ticket, plus one article's breakdown.

The page re-ranks on the client when an importance slider moves. That is exact because importance
enters only the recency term: ``score = relevance×w_s + recency×w_r×importance``, and relevance
(cosine, or the fused relevance in hybrid mode) does not depend on importance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.knowledge.articles import get_article
from service.knowledge.sections import PATH_SEPARATOR
from service.providers.embeddings import embed_narrow
from service.retrieval.ranking import RankingWeights, age_in_days, final_score, formula_text, recency, relevance_kind
from service.retrieval.search import SearchResult, run_search
from service.retrieval.vector_legs import CARD_FULL, QUERY
from service.runtime import Runtime
from service.validation import SEARCH_LIMIT_MAX

PREVIEW_LIMIT_DEFAULT = 5

# The full-precision vector leg of service/retrieval/vector_legs.py for one article, with the same
# expressions, so the numbers match what search returns: its own vector's cosine and its best section's.
ARTICLE_SIMILARITY_SQL = sa.text(f"""
SELECT 1.0 - ({CARD_FULL} <=> {QUERY}) AS card_similarity,
       best.similarity AS section_similarity, best.heading_path
FROM knowledge_base kb
LEFT JOIN LATERAL (
    SELECT 1.0 - (s.embedding <=> {QUERY}) AS similarity, s.heading_path
    FROM knowledge_sections s
    WHERE s.article_id = kb.id AND s.embedding IS NOT NULL AND s.embedding_model = :model
    ORDER BY s.embedding <=> {QUERY}, s.ordinal
    LIMIT 1
) best ON true
WHERE kb.id = :id AND kb.embedding IS NOT NULL AND kb.embedding_model = :model
""")


@dataclass(frozen=True)
class Preview:
    """What the preview endpoint answers."""

    query: str
    mode: str
    degraded: str | None
    limit: int
    weights: dict[str, float]
    now: datetime
    results: list[dict[str, Any]]
    article: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"query": self.query, "mode": self.mode, "degraded": self.degraded, "limit": self.limit,
                "weights": self.weights, "formula": formula_text(self.mode, RankingWeights(**self.weights)),
                "now": self.now.isoformat(),
                "results": self.results, "article": self.article}


def _ranked_further_down(session: Session, runtime: Runtime, query: str, article_id: int,
                         now: datetime) -> dict[str, Any] | None:
    """The article's place among the first SEARCH_LIMIT_MAX results, or None. Lexical and hybrid relevance exist
    only for the articles a search ranks (hybrid's pool is never smaller than that page: service.config), so a
    longer page gives the same numbers the short one would have."""
    outcome = run_search(session, runtime.embedder, query, limit=SEARCH_LIMIT_MAX, weights=runtime.weights,
                         retrieval=runtime.retrieval, now=now)
    for rank, result in enumerate(outcome.results, start=1):
        if result.id == article_id:
            return {**_result_item(result, rank), "note": "outside the top results"}
    return None


def _article_outside_results(session: Session, runtime: Runtime, query: str, article_id: int,
                             now: datetime, mode: str) -> dict[str, Any]:
    """The breakdown of an article the top results left out, or why it has none."""
    stored = get_article(session, article_id, runtime.embedder.model_name)
    base = {"id": stored.id, "title": stored.title, "importance": stored.importance, "rank": None,
            "embedding_status": stored.embedding_status, "relevance": None, "similarity": None,
            "recency": None, "score": None}
    if stored.embedding_status != "embedded":
        return {**base, "note": "not embedded with the active model, so search never returns it"}
    if mode != "vector":
        further = _ranked_further_down(session, runtime, query, article_id, now)
        return further or {**base, "note": f"outside the first {SEARCH_LIMIT_MAX} results; its {mode} relevance "
                                           "is only known for the articles a search ranks"}
    vector = embed_narrow(runtime.embedder, [query])[0]
    row = session.execute(ARTICLE_SIMILARITY_SQL, {
        "query_vector": np.asarray(vector, dtype=np.float32), "id": article_id,
        "model": runtime.embedder.model_name}).one()
    similarity, section = row.card_similarity, None
    if runtime.retrieval.granularity == "section" and row.section_similarity is not None:
        similarity = max(row.card_similarity, row.section_similarity)
        section = PATH_SEPARATOR.join((stored.title, *row.heading_path)) if row.heading_path else None
    weights = runtime.weights
    recency_value = recency(age_in_days(stored.created_at, now), weights.recency_window_days)
    score = final_score(float(similarity), recency_value, stored.importance, weights)
    return {**base, "relevance": float(similarity), "relevance_kind": relevance_kind("vector"),
            "similarity": float(similarity), "recency": recency_value,
            "score": score, "section": section, "note": "outside the top results"}


def _result_item(result: SearchResult, rank: int) -> dict[str, Any]:
    """A result as the preview shows it, with its rank."""
    item = result.to_dict()
    item["rank"] = rank
    if item.get("relevance") is None:
        item["relevance"] = item["similarity"]
    return item


def preview_ranking(session: Session, runtime: Runtime, query: Any, *, limit: Any = PREVIEW_LIMIT_DEFAULT,
                    article_id: int | None = None) -> Preview:
    """The same ranking /api/search gives, and ``article_id``'s place in it even when outside the top."""
    now = datetime.now(timezone.utc)
    outcome = run_search(session, runtime.embedder, query, limit=limit, weights=runtime.weights,
                         retrieval=runtime.retrieval, now=now)
    results = [_result_item(result, rank) for rank, result in enumerate(outcome.results, start=1)]
    article = None
    if article_id is not None:
        article = next((dict(r) for r in results if r["id"] == article_id), None)
        if article is None:
            article = _article_outside_results(session, runtime, query, article_id, now, outcome.mode)
    return Preview(query=query.strip(), mode=outcome.mode, degraded=outcome.degraded, limit=limit,
                   weights=vars(runtime.weights), now=now, results=results, article=article)
