"""The index walk: which articles can be in the exact top-k, read from the HNSW indexes in descending cosine.

Sections and cards are walked through HNSW indexes on ``subvector(embedding, 1, 384)::halfvec(384)`` (migration
0009): the real dimensions of the local model (MiniLM), the rest of the 1536 being zero padding, in half
precision. The walk fetches the ``n`` closest sections and cards with ``hnsw.iterative_scan = strict_order``,
keeps each eligible article's best cosine, and stops once the k-th best *lower bound* of a walked article's score
beats the best score an unwalked article can reach (``ranking.walk_can_stop``); otherwise ``n`` grows ×4 until
the budget, past which the caller runs the exact scan. The candidates are then re-scored exactly, in full
precision, by the same statement as the exact scan (``sql.build_statement(..., candidates=True)``).

What makes the result equal to brute force: (1) the walked cosine of a half-precision vector is within
``HALF_TOLERANCE`` of the full-precision one; (2) the index returns rows in descending cosine and misses none
before the frontier. (2) is HNSW's recall: exact on the small graphs of the tests, measured (recall@k) by
bench/search.py on large ones, and raised with ``WALK_EF_SEARCH``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.retrieval.ranking import RankingWeights, walk_can_stop, walk_score_bound

INDEX_DIMENSIONS = 384  # migration 0009's index expression; a model with more dimensions is never walked
# |cos(half(a), half(b)) − cos(a, b)| ≤ ~3 × 2⁻¹⁰ for unit vectors (each component rounded to 11 bits); doubled.
HALF_TOLERANCE = 0.006
WALK_EF_SEARCH = 100
FIRST_WALK_ROWS = 64
WALK_GROWTH = 4
EXHAUSTED = -2.0  # below any cosine: nothing left unwalked in that stream

_RECENCY = """LEAST(1.0, GREATEST(0.0,
               1.0 - EXTRACT(EPOCH FROM (:now - kb.created_at))::double precision / 86400.0 / :window_days))"""
_HALF_QUERY = f"subvector(CAST(:query_vector AS vector), 1, {INDEX_DIMENSIONS})::halfvec({INDEX_DIMENSIONS})"


def _half(column: str) -> str:
    """The indexed expression, exactly as migration 0009 declares it (the planner matches it textually)."""
    return f"(subvector({column}, 1, {INDEX_DIMENSIONS})::halfvec({INDEX_DIMENSIONS}))"


WALK_SQL = sa.text(f"""
WITH section_walk AS MATERIALIZED (
    SELECT s.article_id, {_half('s.embedding')} <=> {_HALF_QUERY} AS distance
    FROM knowledge_sections s
    WHERE s.embedding_model = :model
    ORDER BY {_half('s.embedding')} <=> {_HALF_QUERY}
    LIMIT :n
),
card_walk AS MATERIALIZED (
    SELECT kb.id AS article_id, {_half('kb.embedding')} <=> {_HALF_QUERY} AS distance
    FROM knowledge_base kb
    WHERE kb.embedding_model = :model
    ORDER BY {_half('kb.embedding')} <=> {_HALF_QUERY}
    LIMIT :n
),
frontier AS (
    SELECT (SELECT count(*) FROM section_walk) AS section_rows, (SELECT count(*) FROM card_walk) AS card_rows,
           1.0 - (SELECT max(distance) FROM section_walk) AS section_frontier,
           1.0 - (SELECT max(distance) FROM card_walk) AS card_frontier
),
walked AS (
    SELECT w.article_id, 1.0 - min(w.distance) AS similarity, kb.importance, {_RECENCY} AS recency
    FROM (SELECT * FROM section_walk UNION ALL SELECT * FROM card_walk) w
    JOIN knowledge_base kb ON kb.id = w.article_id
    WHERE kb.embedding IS NOT NULL AND kb.embedding_model = :model
      AND (CAST(:source_prefix AS text) IS NULL OR starts_with(kb.source_path, :source_prefix))
    GROUP BY w.article_id, kb.importance, kb.created_at
)
SELECT f.*, w.article_id, w.similarity, w.importance, w.recency
FROM frontier f LEFT JOIN walked w ON true
""").bindparams(sa.bindparam("now", type_=sa.DateTime(timezone=True)),
                sa.bindparam("window_days", type_=sa.Double))

# Served by the btree of migration 0009: one index probe, not a scan. An upper bound of any eligible boost.
MAX_IMPORTANCE_SQL = sa.text("SELECT coalesce(max(importance), 0.0) FROM knowledge_base")
# The planner's row estimate: a small table is scanned exactly, never walked.
SECTION_ESTIMATE_SQL = sa.text("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'knowledge_sections'::regclass")
COUNT_SECTIONS_SQL = sa.text(
    "SELECT count(*) FROM knowledge_sections WHERE embedding_model = :model AND embedding IS NOT NULL")
COUNT_CARDS_SQL = sa.text(
    "SELECT count(*) FROM knowledge_base WHERE embedding_model = :model AND embedding IS NOT NULL")
WALK_SETTINGS_SQL = sa.text("""
SELECT set_config('hnsw.iterative_scan', 'strict_order', true), set_config('hnsw.ef_search', :ef_search, true),
       set_config('hnsw.max_scan_tuples', :max_scan_tuples, true)
""")


@dataclass(frozen=True)
class WalkResult:
    """The articles that can be in the top-k, and the cosine above which every article was walked."""

    candidate_ids: list[int]
    frontier_similarity: float
    walked_rows: int


def can_walk(query_vector: np.ndarray) -> bool:
    """Only a vector whose dimensions past the indexed ones are zero (a model of ≤ 384) walks exactly."""
    vector = np.asarray(query_vector, dtype=np.float32)
    return vector.shape[0] >= INDEX_DIMENSIONS and not np.any(vector[INDEX_DIMENSIONS:])


def walk_candidates(session: Session, query_vector: np.ndarray, *, model: str, limit: int,
                    weights: RankingWeights, now: datetime, budget: int, first_rows: int = FIRST_WALK_ROWS,
                    source_prefix: str | None = None
                    ) -> WalkResult | None:
    """Candidates that provably hold the exact top-``limit``, or None (walk past ``budget``: scan instead)."""
    max_importance = float(session.execute(MAX_IMPORTANCE_SQL).scalar_one())
    session.execute(WALK_SETTINGS_SQL, {"ef_search": str(WALK_EF_SEARCH), "max_scan_tuples": str(4 * budget)})
    params = {"query_vector": np.asarray(query_vector, dtype=np.float32), "model": model, "now": now,
              "window_days": weights.recency_window_days, "source_prefix": source_prefix}
    n = min(budget, max(first_rows, limit))
    while True:
        rows = session.execute(WALK_SQL, {**params, "n": n}).mappings().all()
        frontiers = _frontiers(session, rows[0], n=n, model=model)
        if frontiers is None:
            return None
        walked = [r for r in rows if r["article_id"] is not None]
        candidates = WalkResult(candidate_ids=[int(r["article_id"]) for r in walked],
                                frontier_similarity=max(frontiers), walked_rows=2 * n)
        if max(frontiers) < -1.0:  # both streams exhausted: every article was walked
            return candidates
        lower = [(float(r["similarity"]) - HALF_TOLERANCE) * weights.similarity_weight
                 + float(r["recency"]) * weights.recency_weight * float(r["importance"]) for r in walked]
        bound = walk_score_bound(max(frontiers), max_importance=max_importance, weights=weights,
                                 tolerance=HALF_TOLERANCE)
        if walk_can_stop(lower, k=limit, unseen_bound=bound):
            return candidates
        if n >= budget:
            return None
        n = min(budget, n * WALK_GROWTH)


def _frontiers(session: Session, head, *, n: int, model: str) -> tuple[float, float] | None:
    """Each stream's last walked cosine; ``EXHAUSTED`` for a stream the index returned whole, None if unsure."""
    frontiers = []
    for kind, count_sql in (("section", COUNT_SECTIONS_SQL), ("card", COUNT_CARDS_SQL)):
        if head[f"{kind}_rows"] == n:
            frontiers.append(float(head[f"{kind}_frontier"]))
        # Fewer than asked: the whole stream, unless the scan stopped early (max_scan_tuples, graph gaps).
        elif session.execute(count_sql, {"model": model}).scalar_one() == head[f"{kind}_rows"]:
            frontiers.append(EXHAUSTED)
        else:
            return None
    return frontiers[0], frontiers[1]


def section_estimate(session: Session) -> int:
    """How many sections the planner thinks there are (0 before the first ANALYZE)."""
    return int(session.execute(SECTION_ESTIMATE_SQL).scalar_one())
