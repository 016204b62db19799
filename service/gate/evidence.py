"""Reading the evidence features of an answer attempt: the search outcome, the lexical leg's view, and how close
the question is to the cited section's heading."""

from __future__ import annotations

import logging

import numpy as np
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from service.gate.features import LEXICAL_DEPTH, Features, cited_heading, compute_features
from service.providers.embeddings import Embedder, EmbeddingError, embed_narrow
from service.retrieval.ranking import RankingWeights
from service.retrieval.search import SearchOutcome, lexical_ranking
from service.retrieval.sql import RetrievalSettings

log = logging.getLogger(__name__)


def heading_similarity(embedder: Embedder, query: str, heading: str, title: str | None = None) -> float | None:
    """The larger cosine of the question with a heading and with the article's title (None if the embedder fails:
    the feature falls back). A help center's title is often the question itself ("How to request a refund") while
    the best-matching section is a step of it ("When will I get my money back?")."""
    texts = [query, heading] + ([title] if title and title != heading else [])
    try:
        # One batch of short texts (a few milliseconds locally); the search's own query vector is not
        # returned by run_search, and re-embedding the query is cheaper than widening that contract.
        vectors = embed_narrow(embedder, texts)
    except EmbeddingError as exc:
        log.warning("heading not embedded for the gate: %s", exc)
        return None
    q = vectors[0] / np.linalg.norm(vectors[0])
    return max(float(q @ v / np.linalg.norm(v)) for v in vectors[1:])


def gather_features(session: Session, embedder: Embedder, query: str, outcome: SearchOutcome, *, floor: float,
                    weights: RankingWeights, retrieval: RetrievalSettings) -> Features | None:
    """The features of answering ``query`` with the outcome's rank-1 article (None without a cosine)."""
    if not outcome.results or all(r.similarity is None for r in outcome.results):
        return None
    try:
        with session.begin_nested():  # a cancelled BM25 statement (and its timeout setting) spoils only this
            lexical = lexical_ranking(session, embedder, query, limit=LEXICAL_DEPTH, weights=weights,
                                      retrieval=retrieval)
    except OperationalError as exc:  # the keyword leg timed out: the features say it found nothing
        log.warning("lexical leg failed for the gate's features: %s", exc)
        lexical = []
    heading = heading_similarity(embedder, query, cited_heading(outcome.results[0]), outcome.results[0].title)
    return compute_features(query, outcome.results, lexical, floor, heading)
