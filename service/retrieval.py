"""SQL that fetches ranked articles. Takes a vector, never text."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from .ranking import RankingWeights, final_score

# Exact top-k of the product formula over every eligible row. The formula is
# evaluated for all rows before ORDER BY/LIMIT, so a row far down the cosine list
# but lifted by recency×importance (up to +0.4) is never missed. Vectors are
# stored PLAIN (in the heap page), so this scan reads no TOAST.
SEARCH_EXACT_SQL = sa.text("""
WITH scored AS (
    SELECT id,
           title,
           category,
           content,
           importance,
           created_at,
           1.0 - (embedding <=> :query_vector) AS similarity,
           LEAST(1.0, GREATEST(0.0,
               1.0 - EXTRACT(EPOCH FROM (:now - created_at))::double precision / 86400.0 / :window_days
           )) AS recency
    FROM knowledge_base
    WHERE embedding IS NOT NULL
      AND embedding_model = :model
      AND (CAST(:source_prefix AS text) IS NULL OR starts_with(source_path, :source_prefix))
)
SELECT id, title, category, content, importance, created_at, similarity, recency,
       similarity * :similarity_weight + recency * :recency_weight * importance AS score
FROM scored
ORDER BY score DESC, id
LIMIT :limit
""").bindparams(
    sa.bindparam("now", type_=sa.DateTime(timezone=True)),
    sa.bindparam("window_days", type_=sa.Double),
    sa.bindparam("similarity_weight", type_=sa.Double),
    sa.bindparam("recency_weight", type_=sa.Double),
)


@dataclass(frozen=True)
class ScoredRow:
    """One ranked article with every part of its score."""

    id: int
    title: str
    category: str | None
    content: str
    importance: float
    created_at: datetime
    similarity: float
    recency: float
    score: float


def search_by_vector(session: Session, query_vector: np.ndarray, *, model: str, limit: int,
                     weights: RankingWeights, now: datetime, source_prefix: str | None = None) -> list[ScoredRow]:
    """The exact top-``limit`` rows for ``query_vector`` among rows embedded by ``model``.

    ``source_prefix`` restricts the search to articles imported from under that path.
    """
    rows = session.execute(SEARCH_EXACT_SQL, {
        "query_vector": np.asarray(query_vector, dtype=np.float32),
        "model": model,
        "limit": limit,
        "now": now,
        "window_days": weights.recency_window_days,
        "similarity_weight": weights.similarity_weight,
        "recency_weight": weights.recency_weight,
        "source_prefix": source_prefix,
    }).mappings()
    return [
        ScoredRow(
            id=row["id"], title=row["title"], category=row["category"], content=row["content"],
            importance=row["importance"], created_at=row["created_at"],
            similarity=float(row["similarity"]), recency=float(row["recency"]),
            # Recomputed by the pure function: the SQL orders, Python is the reference.
            score=final_score(float(row["similarity"]), float(row["recency"]), row["importance"], weights),
        )
        for row in rows
    ]
