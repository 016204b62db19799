"""The hybrid statement's pool (z-score and min-max fusion): each leg's best articles, fused exactly.

Fusing every article of a large knowledge base means a BM25 for every article that shares a common word with
the query. Instead, as Elasticsearch's linear retriever and OpenSearch's normalisation processor do, fusion
reads a pool: the ``GREATEST(:pool, :limit)`` articles most similar to the query (``pool_vector``) and as many
with the best BM25 (``pool_lexical``: exact, scoring only the articles that can reach it,
service.retrieval.bm25_prune), each pool article with both of its scores, exact. Unlike those, the legs
are normalised by their spread over the whole knowledge base (service.retrieval.fusion), not over the pool, so
the pool's size does not decide the ranking.

``precision="half"`` (the default): the pool's vector half is found as vector mode finds its top-k: the
half-precision scan (``half_leg``), its candidates within ``:pool_margin`` of the pool's last half-precision
similarity (service.retrieval.precision: the full-precision top-``pool`` is among them), re-scored in full
precision. ``precision="full"``: every eligible article in full precision (the tests' reference). Both read the
vector leg's spread from ``half_leg``, so both fuse the same numbers.
"""

from __future__ import annotations

from service.retrieval.bm25 import lexical_scores
from service.retrieval.bm25_prune import lexical_top_leg
from service.retrieval.fusion import FUSED, spreads
from service.retrieval.vector_legs import exact_leg, half_leg

POOL_SIZE = "GREATEST(:pool, :limit)"

_HALF_CANDIDATES = f"""pool_vector_candidates AS MATERIALIZED (
    SELECT e.* FROM eligible e JOIN half_leg h ON h.id = e.id
    WHERE h.similarity >= coalesce((SELECT similarity FROM half_leg ORDER BY similarity DESC
                                    LIMIT 1 OFFSET {POOL_SIZE} - 1), '-infinity'::double precision) - :pool_margin
)"""

_POOL = f"""pool_vector AS (
    SELECT id FROM {{scores}} ORDER BY similarity DESC, id LIMIT {POOL_SIZE}
),
pool_lexical AS (
    SELECT id, lexical_score, row_number() OVER (ORDER BY lexical_score DESC, id) AS lexical_rank FROM lexical_top
),
pool_rows AS MATERIALIZED (
    SELECT e.* FROM eligible e
    WHERE e.id IN (SELECT id FROM pool_vector UNION SELECT id FROM pool_lexical)
)"""

# Every pool article's exact BM25 (the vector half's too: a handful of articles, scored directly); its rank by
# BM25 among all articles is known when it is in the lexical half (its place there), else NULL.
_POOL_BM25 = f"""{lexical_scores("pool_rows")},
lexical_ranked AS (
    SELECT l.id, l.lexical_score, l.lexical_section_id, p.lexical_rank
    FROM lexical l LEFT JOIN pool_lexical p ON p.id = l.id
)"""

_POOL_LEGS = """pool_legs AS (
    SELECT e.id, e.importance, e.created_at, e.recency, v.similarity, v.section_id, v.section_similarity,
           l.lexical_score, l.lexical_rank, l.lexical_section_id
    FROM pool_rows e JOIN {leg} v ON v.id = e.id LEFT JOIN lexical_ranked l ON l.id = e.id
)"""


def pool_ctes(granularity: str, fusion: str, precision: str) -> list[str]:
    """Everything between ``eligible`` and ``fused`` for z-score / min-max hybrid: the half-precision scan, the
    lexical half of the pool (pruned: service.retrieval.bm25_prune), the vector half, both legs over the pool,
    the fusion."""
    if precision == "half":
        vector = [_HALF_CANDIDATES,
                  exact_leg(granularity, rows="pool_vector_candidates", precision="half", name="pool_vector_scores"),
                  _POOL.format(scores="pool_vector_scores"),
                  exact_leg(granularity, rows="pool_rows", precision="half", name="vector_leg")]
    else:
        # eligible's card similarity is the half-precision one here: "half" re-reads the card in full.
        vector = [exact_leg(granularity, rows="eligible", precision="half", name="vector_leg"),
                  _POOL.format(scores="vector_leg")]
    return [half_leg(granularity), lexical_top_leg(POOL_SIZE), *vector, _POOL_BM25, _POOL_LEGS.format(leg="vector_leg"),
            spreads(fusion), FUSED]
