"""The vector parts of the search statements: cosines at the model's width, half precision then full.

``precision="half"`` (vector mode and convex hybrid): the scan reads every eligible article's card and sections
in half precision (``embedding_half``, migration 0015) into ``half_leg``; ``candidates`` keeps the articles
whose half-precision score is within ``:margin`` of the k-th best (service.retrieval.precision proves the
full-precision top-k is among them); ``vector_leg`` re-scores just those in full precision. The statement's
other parts (fusion, the final top-k) then read ``vector_leg`` as they would the full scan's, so the result is
the full-precision scan's, ties by id included.

``precision="full"``: ``vector_leg`` over every eligible article in full precision (RRF needs every article's
exact vector rank; tests use it as the reference).

The query is sent once, in full precision at the model's width (``:query_vector``); its half-precision form is
computed by the statement, exactly as the stored ones are (``l2_normalize(…)::halfvec``).
"""

from __future__ import annotations

QUERY = "CAST(:query_vector AS vector)"
HALF_QUERY = f"CAST(l2_normalize({QUERY}) AS halfvec)"
# An article's own vector is stored padded to 1536 (knowledge_base.embedding, the mission's column).
CARD_FULL = f"subvector(kb.embedding, 1, vector_dims({QUERY}))"

CARD_SIMILARITY = {
    "half": f"1.0 - (kb.embedding_half <=> {HALF_QUERY})",
    "full": f"1.0 - ({CARD_FULL} <=> {QUERY})",
}

_NO_SECTION = "NULL::bigint AS section_id, NULL::double precision AS section_similarity"


def half_leg(granularity: str) -> str:
    """Every eligible article's half-precision similarity: the best of its card's and its sections'."""
    if granularity == "article":
        return f"half_leg AS (\n    SELECT id, card_similarity AS similarity, {_NO_SECTION} FROM eligible\n)"
    return f"""half_sections AS (
    SELECT s.article_id, min(s.embedding_half <=> {HALF_QUERY}) AS distance
    FROM knowledge_sections s JOIN eligible e ON e.id = s.article_id
    WHERE s.embedding_half IS NOT NULL AND s.embedding_model = :model
    GROUP BY s.article_id
),
half_leg AS (
    SELECT e.id, GREATEST(e.card_similarity, coalesce(1.0 - b.distance, -1.0)) AS similarity, {_NO_SECTION}
    FROM eligible e LEFT JOIN half_sections b ON b.article_id = e.id
)"""


# The articles whose half-precision score reaches the k-th best less the margin (all of them below k rows).
CANDIDATES = """half_scored AS MATERIALIZED (
    SELECT id, relevance * :similarity_weight + recency * :recency_weight * importance AS score FROM half_fused
),
candidates AS MATERIALIZED (
    SELECT e.* FROM eligible e JOIN half_scored h ON h.id = e.id
    WHERE h.score >= coalesce((SELECT score FROM half_scored ORDER BY score DESC LIMIT 1 OFFSET :limit - 1),
                              '-infinity'::double precision) - :margin
)"""


def exact_leg(granularity: str, *, rows: str, precision: str, name: str = "vector_leg") -> str:
    """Full-precision similarity of each article in ``rows`` (``eligible``, or a few candidates), and its best
    section, as CTE ``name``. Over ``eligible`` in full precision, ``rows.card_similarity`` already holds the
    card's; a few candidates are looked up one by one (by index), not joined to a scan of every section."""
    card = "e.card_similarity" if precision == "full" else f"""(SELECT 1.0 - ({CARD_FULL} <=> {QUERY})
             FROM knowledge_base kb WHERE kb.id = e.id)"""
    if granularity == "section" and rows != "eligible":
        return _candidate_sections_leg(card, rows=rows, name=name)
    if granularity == "article":
        return f"""{name} AS (
    SELECT e.id, {card} AS similarity, NULL::bigint AS section_id,
           NULL::double precision AS section_similarity
    FROM {rows} e
)"""
    return f"""section_hits AS (
    SELECT s.article_id, s.id, s.ordinal, s.embedding <=> {QUERY} AS distance
    FROM knowledge_sections s JOIN {rows} e ON e.id = s.article_id
    WHERE s.embedding IS NOT NULL AND s.embedding_model = :model
),
best_section AS (
    SELECT DISTINCT ON (article_id) article_id, id AS section_id, 1.0 - distance AS section_similarity
    FROM section_hits
    ORDER BY article_id, distance, ordinal
),
{name} AS (
    SELECT e.id, GREATEST({card}, coalesce(b.section_similarity, -1.0)) AS similarity,
           b.section_id, b.section_similarity
    FROM {rows} e LEFT JOIN best_section b ON b.article_id = e.id
)"""


def _candidate_sections_leg(card: str, *, rows: str, name: str) -> str:
    """``exact_leg`` for a handful of candidates: each one's sections by index, not a scan of every section
    (the same numbers: the smallest distance, ties by ordinal)."""
    return f"""{name} AS (
    SELECT e.id, GREATEST({card}, coalesce(b.section_similarity, -1.0)) AS similarity,
           b.section_id, b.section_similarity
    FROM {rows} e LEFT JOIN LATERAL (
        SELECT s.id AS section_id, 1.0 - (s.embedding <=> {QUERY}) AS section_similarity
        FROM knowledge_sections s
        WHERE s.article_id = e.id AND s.embedding IS NOT NULL AND s.embedding_model = :model
        ORDER BY s.embedding <=> {QUERY}, s.ordinal
        LIMIT 1
    ) b ON true
)"""


def _exact_similarity(granularity: str) -> str:
    """Article ``o``'s full-precision similarity, as ``exact_leg`` computes it."""
    card = f"(SELECT 1.0 - ({CARD_FULL} <=> {QUERY}) FROM knowledge_base kb WHERE kb.id = o.id)"
    if granularity == "article":
        return card
    return f"""GREATEST({card}, coalesce(
                (SELECT 1.0 - min(s.embedding <=> {QUERY}) FROM knowledge_sections s
                 WHERE s.article_id = o.id AND s.embedding IS NOT NULL AND s.embedding_model = :model), -1.0))"""


def vector_rank(granularity: str, precision: str) -> str:
    """Row ``top``'s rank by full-precision similarity alone among every eligible article (ties by id).

    In half precision: the articles whose half similarity is above ``top``'s by more than the error bound are
    above it; those within the bound are re-scored in full precision one by one (a handful)."""
    if precision == "full":
        return """(SELECT count(*) + 1 FROM vector_leg o
            WHERE o.similarity > top.similarity OR (o.similarity = top.similarity AND o.id < top.id))"""
    return f"""((SELECT count(*) + 1 FROM half_leg o WHERE o.similarity > top.similarity + :similarity_margin)
        + (SELECT count(*) FROM half_leg o CROSS JOIN LATERAL (SELECT {_exact_similarity(granularity)} AS value) x
           WHERE o.similarity BETWEEN top.similarity - :similarity_margin AND top.similarity + :similarity_margin
             AND o.id <> top.id
             AND (x.value > top.similarity OR (x.value = top.similarity AND o.id < top.id))))"""
