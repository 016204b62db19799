"""Pure scoring: the hybrid formula and its parts. No I/O."""

from __future__ import annotations

from datetime import datetime

from service.config import RankingWeights  # the formula's weights are settings; defined with them

SECONDS_PER_DAY = 86_400.0


def age_in_days(created_at: datetime, now: datetime) -> float:
    """Fractional days between creation and ``now`` (negative if created in the future)."""
    return (now - created_at).total_seconds() / SECONDS_PER_DAY


def recency(age_days: float, window_days: float = 365.0) -> float:
    """``max(0, 1 - age_days/window)``, capped at 1 for rows dated in the future (clock skew)."""
    return min(1.0, max(0.0, 1.0 - age_days / window_days))


def final_score(similarity: float, recency_value: float, importance: float,
                weights: RankingWeights = RankingWeights()) -> float:
    """The ranking formula, exactly as the product defines it."""
    return similarity * weights.similarity_weight + recency_value * weights.recency_weight * importance


# What enters the formula as ``relevance`` in each mode (issue 27): vector mode is the card's formula exactly
# (relevance is the cosine similarity); hybrid replaces the similarity by a fused relevance in [0, 1]; lexical by
# the article's BM25 over the best BM25 of the query.
RELEVANCE_KINDS = {"vector": "similarity", "hybrid": "fused relevance", "lexical": "lexical relevance"}


def relevance_kind(mode: str) -> str:
    """The name of what enters the formula in ``mode`` (``similarity`` in vector mode)."""
    return RELEVANCE_KINDS[mode]


def formula_text(mode: str, weights: RankingWeights = RankingWeights()) -> str:
    """The formula a result's score follows in ``mode``, with the configured weights, for people to check."""
    return (f"score = {weights.similarity_weight:g} × {relevance_kind(mode)} + "
            f"{weights.recency_weight:g} × recency × importance")


def convex_relevance(similarity: float | None, lexical_norm: float | None, vector_weight: float) -> float:
    """Normalised convex combination: ``w·cosine + (1−w)·lexical``, a missing leg counting 0."""
    return vector_weight * (similarity or 0.0) + (1.0 - vector_weight) * (lexical_norm or 0.0)


def rrf_relevance(vector_rank: int | None, lexical_rank: int | None, *, vector_weight: float,
                  k: float = 60.0) -> float:
    """Weighted reciprocal rank fusion scaled to [0, 1] (1 = first in both legs)."""
    lexical_weight = 1.0 - vector_weight
    total = (vector_weight / (k + vector_rank) if vector_rank else 0.0) + \
            (lexical_weight / (k + lexical_rank) if lexical_rank else 0.0)
    return total * (k + 1.0)
