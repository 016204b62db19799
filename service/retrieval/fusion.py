"""Score-normalised convex fusion for the hybrid statement (service.retrieval.sql): z-score or min-max.

Each leg is divided by its spread over the whole knowledge base, then fused as ``w·vector + (1−w)·lexical``:

- ``zscore``: the vector leg's standard deviation over every eligible article (the half-precision scan reads
  them all anyway); the lexical leg's standard deviation estimated from the term statistics, as if each query
  term occurred in an article independently with probability ``p = df/N`` and added its idf when it does:
  ``σ = √(Σ idf²·p·(1−p))``. Scoring every article that matches a common word, only to learn how spread out
  those scores are, is what made fusion cost a full BM25 of the corpus; the estimate costs one row per term.
- ``minmax``: the ranges: the vector leg's (best − worst half-precision similarity over every eligible
  article) and the lexical leg's (its best BM25: some article matches no term and scores 0).

A z-score's mean and a min-max's minimum shift every article alike, so they drop out: ``combined =
w·similarity/spread_v + (1−w)·bm25/spread_l``. Only the pool is fused (service.retrieval.pool: each leg's top
``:pool`` articles), and ``combined`` is min-maxed over it to [0, 1], so relevance keeps one scale against the
recency × importance boost. With spreads taken over the whole base, the pool's size does not change the
ranking it finds (`bench/fusion_sweep.py --pool 20` gives the default pool's nDCG on the three dev sets, to the
last digit).
"""

from __future__ import annotations

_VECTOR_SPREAD = {
    "zscore": "stddev_pop(similarity)",
    "minmax": "max(similarity) - min(similarity)",
}
_LEXICAL_SPREAD = {
    "zscore": """(SELECT sqrt(sum(q.idf * q.idf * t.df::double precision / n.units
                                  * (1.0 - t.df::double precision / n.units)))
             FROM bm25_query q JOIN bm25_terms t ON t.term = q.term CROSS JOIN bm25_totals n)""",
    "minmax": "(SELECT max(lexical_score) FROM pool_lexical)",
}


def spreads(fusion: str) -> str:
    """The ``spreads`` CTE: each leg's spread over the whole knowledge base (NULL when it has none)."""
    return f"""spreads AS MATERIALIZED (
    SELECT NULLIF({_VECTOR_SPREAD[fusion]}, 0) AS vector_spread, NULLIF({_LEXICAL_SPREAD[fusion]}, 0) AS lexical_spread
    FROM half_leg
)"""


FUSED = """combined AS (
    SELECT p.*, coalesce(:vector_weight * p.similarity / s.vector_spread, 0.0)
                + coalesce((1.0 - :vector_weight) * coalesce(p.lexical_score, 0.0) / s.lexical_spread, 0.0)
                AS combined
    FROM pool_legs p CROSS JOIN spreads s
),
fused AS (
    SELECT id, importance, created_at, recency, similarity, section_id, section_similarity,
           coalesce((combined - min(combined) OVER ()) / NULLIF(max(combined) OVER () - min(combined) OVER (), 0),
                    1.0) AS relevance,
           lexical_score, lexical_rank, lexical_section_id
    FROM combined
)"""
