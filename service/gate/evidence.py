"""Reading the evidence features of an answer attempt: the search outcome plus the lexical leg's view."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.gate.features import LEXICAL_DEPTH, Features, compute_features
from service.providers.embeddings import Embedder
from service.retrieval.ranking import RankingWeights
from service.retrieval.search import SearchOutcome, lexical_ranking
from service.retrieval.sql import RetrievalSettings


def gather_features(session: Session, embedder: Embedder, query: str, outcome: SearchOutcome, *, floor: float,
                    weights: RankingWeights, retrieval: RetrievalSettings) -> Features | None:
    """The features of answering ``query`` with the outcome's rank-1 article (None without a cosine)."""
    if not outcome.results or all(r.similarity is None for r in outcome.results):
        return None
    lexical = lexical_ranking(session, embedder, query, limit=LEXICAL_DEPTH, weights=weights, retrieval=retrieval)
    return compute_features(query, outcome.results, lexical, floor)
