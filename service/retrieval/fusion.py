"""Score-normalised convex fusion for the hybrid statement (service.retrieval.sql): min-max or z-score.

Each leg is normalised over every eligible article (the exact scan reads them all; an article no query term
matches has BM25 0), then fused as ``w·vector + (1−w)·lexical``. A z-score sum is unbounded, so it is min-maxed
back to [0, 1]: relevance keeps the same scale against the recency × importance boost in every fusion.
"""

from __future__ import annotations

_NORMALISE = {
    "minmax": "({x} - min({x}) OVER ()) / NULLIF(max({x}) OVER () - min({x}) OVER (), 0)",
    "zscore": "({x} - avg({x}) OVER ()) / NULLIF(stddev_pop({x}) OVER (), 0)",
}


def normalised_fusion(fusion: str) -> str:
    """The ``fused`` CTE (and the two before it) for ``fusion`` in ("minmax", "zscore")."""
    vector_norm = _NORMALISE[fusion].format(x="similarity")
    lexical_norm = _NORMALISE[fusion].format(x="lexical_value")
    relevance = "combined" if fusion == "minmax" else f"coalesce({_NORMALISE['minmax'].format(x='combined')}, 1.0)"
    return f"""legs AS (
    SELECT e.id, e.importance, e.created_at, e.recency, v.similarity, v.section_id, v.section_similarity,
           l.lexical_score, l.lexical_rank, l.lexical_section_id, coalesce(l.lexical_score, 0.0) AS lexical_value
    FROM eligible e JOIN vector_leg v ON v.id = e.id LEFT JOIN lexical_ranked l ON l.id = e.id
),
combined AS (
    SELECT *, :vector_weight * coalesce({vector_norm}, 0.0)
              + (1.0 - :vector_weight) * coalesce({lexical_norm}, 0.0) AS combined
    FROM legs
),
fused AS (
    SELECT id, importance, created_at, recency, similarity, section_id, section_similarity,
           {relevance} AS relevance, lexical_score, lexical_rank, lexical_section_id
    FROM combined
)"""
