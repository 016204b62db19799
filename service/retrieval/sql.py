"""SQL that fetches ranked articles. Takes a vector, never text."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.retrieval.ranking import RankingWeights, final_score


def _formula_binds() -> list[sa.BindParameter]:
    """Typed binds of the ranking formula's parameters, shared by the search statements."""
    return [
        sa.bindparam("now", type_=sa.DateTime(timezone=True)),
        sa.bindparam("window_days", type_=sa.Double),
        sa.bindparam("similarity_weight", type_=sa.Double),
        sa.bindparam("recency_weight", type_=sa.Double),
    ]


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
""").bindparams(*_formula_binds())


# The lexical and hybrid paths. The lexical leg is bounded (LIMIT, and the
# caller's statement_timeout); the vector leg still scans every eligible row, so
# in hybrid mode the top-k remains exact for the fused formula. Relevance:
#   lexical: ts_rank / best ts_rank of this query (only lexical matches are returned; ts_rank beat
#            ts_rank_cd on the dev set, nDCG@10 .711 vs .469, because OR matches have no cover)
#   hybrid, convex: w·cosine + (1−w)·lexical_norm
#   hybrid, rrf:    (w/(k+vector_rank) + (1−w)/(k+lexical_rank)) · (k+1)
# mirroring service.retrieval.ranking.convex_relevance / rrf_relevance.
SEARCH_FUSED_SQL = sa.text("""
WITH lexical AS (
    -- The ranked OR fallback: articles matching every word (the AND query) come first.
    SELECT id, ts_rank(search_vector, CAST(:tsquery AS tsquery))
               + CASE WHEN search_vector @@ CAST(:and_tsquery AS tsquery) THEN 1.0 ELSE 0.0 END AS lexical_score
    FROM knowledge_base
    WHERE CAST(:tsquery AS text) IS NOT NULL
      AND search_vector @@ CAST(:tsquery AS tsquery)
      AND embedding IS NOT NULL AND embedding_model = :model
      AND (CAST(:source_prefix AS text) IS NULL OR starts_with(source_path, :source_prefix))
    ORDER BY lexical_score DESC, id
    LIMIT :lexical_limit
),
lexical_ranked AS (
    SELECT id, lexical_score,
           row_number() OVER (ORDER BY lexical_score DESC, id) AS lexical_rank,
           lexical_score / NULLIF(max(lexical_score) OVER (), 0) AS lexical_norm
    FROM lexical
),
candidates AS (
    SELECT kb.id, kb.title, kb.category, kb.content, kb.importance, kb.created_at, kb.search_vector,
           CASE WHEN CAST(:query_vector AS vector) IS NULL THEN NULL
                ELSE 1.0 - (kb.embedding <=> CAST(:query_vector AS vector)) END AS similarity,
           CASE WHEN CAST(:query_vector AS vector) IS NULL THEN NULL
                ELSE row_number() OVER (ORDER BY kb.embedding <=> CAST(:query_vector AS vector), kb.id) END
               AS vector_rank,
           lr.lexical_score, lr.lexical_rank, lr.lexical_norm,
           LEAST(1.0, GREATEST(0.0,
               1.0 - EXTRACT(EPOCH FROM (:now - kb.created_at))::double precision / 86400.0 / :window_days
           )) AS recency
    FROM knowledge_base kb
    LEFT JOIN lexical_ranked lr ON lr.id = kb.id
    WHERE kb.embedding IS NOT NULL AND kb.embedding_model = :model
      AND (CAST(:source_prefix AS text) IS NULL OR starts_with(kb.source_path, :source_prefix))
      AND (:mode <> 'lexical' OR lr.id IS NOT NULL)
),
fused AS (
    SELECT *,
           CASE WHEN :mode = 'lexical' THEN coalesce(lexical_norm, 0.0)
                WHEN :fusion = 'rrf' THEN
                    (:vector_weight / (:rrf_k + vector_rank)
                     + coalesce((1.0 - :vector_weight) / (:rrf_k + lexical_rank), 0.0)) * (:rrf_k + 1.0)
                ELSE :vector_weight * similarity + (1.0 - :vector_weight) * coalesce(lexical_norm, 0.0)
           END AS relevance
    FROM candidates
)
SELECT id, title, category, content, importance, created_at, similarity, recency, relevance,
       vector_rank, lexical_rank, lexical_score,
       ARRAY(SELECT u.lexeme FROM unnest(search_vector) AS u
             WHERE u.lexeme = ANY(CAST(:lexemes AS text[]))) AS matched_terms,
       CASE WHEN lexical_rank IS NOT NULL THEN
           ts_headline('english', content,
                       CASE WHEN search_vector @@ CAST(:and_tsquery AS tsquery)
                            THEN CAST(:and_tsquery AS tsquery) ELSE CAST(:tsquery AS tsquery) END,
                       'MaxFragments=1, MinWords=12, MaxWords=30, StartSel=**, StopSel=**')
       END AS headline,
       relevance * :similarity_weight + recency * :recency_weight * importance AS score
FROM fused
ORDER BY score DESC, id
LIMIT :limit
""").bindparams(
    *_formula_binds(),
    sa.bindparam("vector_weight", type_=sa.Double),
    sa.bindparam("rrf_k", type_=sa.Double),
)

# The AND query decides between AND and OR: how many articles match every word?
COUNT_MATCHES_SQL = sa.text("""
SELECT count(*) FROM (
    SELECT 1 FROM knowledge_base
    WHERE search_vector @@ CAST(:tsquery AS tsquery) AND embedding IS NOT NULL AND embedding_model = :model
      AND (CAST(:source_prefix AS text) IS NULL OR starts_with(source_path, :source_prefix))
    LIMIT :enough
) AS matches
""")


@dataclass(frozen=True)
class RetrievalSettings:
    """Which relevance enters the formula: ``vector`` (cosine), ``lexical`` or ``hybrid`` (see SEARCH_FUSED_SQL)."""

    mode: str = "vector"
    fusion: str = "convex"  # "convex" | "rrf"
    vector_weight: float = 0.95
    rrf_k: float = 60.0
    lexical_limit: int = 200
    statement_timeout_ms: int = 2000


@dataclass(frozen=True)
class FusedRow:
    """A ranked article with both legs' evidence."""

    id: int
    title: str
    category: str | None
    content: str
    importance: float
    created_at: datetime
    similarity: float | None
    recency: float
    relevance: float
    score: float
    vector_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    matched_terms: list[str]
    headline: str | None = None  # ts_headline fragment with the matched words in **bold**


def count_lexical_matches(session: Session, tsquery: str, *, model: str, enough: int,
                          source_prefix: str | None = None) -> int:
    """Matches of ``tsquery``, counted up to ``enough``."""
    return session.execute(COUNT_MATCHES_SQL, {"tsquery": tsquery, "model": model, "enough": enough,
                                               "source_prefix": source_prefix}).scalar_one()


def search_fused(session: Session, query_vector: np.ndarray | None, tsquery: str | None, lexemes: list[str], *,
                 model: str, limit: int, weights: RankingWeights, fusion: RetrievalSettings, now: datetime,
                 source_prefix: str | None = None, and_tsquery: str | None = None) -> list[FusedRow]:
    """Top-``limit`` rows by ``relevance×w + recency×w×importance`` with lexical or hybrid relevance."""
    rows = session.execute(SEARCH_FUSED_SQL, {
        "query_vector": None if query_vector is None else np.asarray(query_vector, dtype=np.float32),
        "tsquery": tsquery, "and_tsquery": and_tsquery or tsquery, "lexemes": lexemes, "model": model,
        "limit": limit, "now": now,
        "window_days": weights.recency_window_days, "similarity_weight": weights.similarity_weight,
        "recency_weight": weights.recency_weight, "mode": fusion.mode, "fusion": fusion.fusion,
        "vector_weight": fusion.vector_weight, "rrf_k": fusion.rrf_k, "lexical_limit": fusion.lexical_limit,
        "source_prefix": source_prefix,
    }).mappings()
    return [
        FusedRow(
            id=r["id"], title=r["title"], category=r["category"], content=r["content"], importance=r["importance"],
            created_at=r["created_at"], similarity=None if r["similarity"] is None else float(r["similarity"]),
            recency=float(r["recency"]), relevance=float(r["relevance"]),
            score=final_score(float(r["relevance"]), float(r["recency"]), r["importance"], weights),
            vector_rank=r["vector_rank"], lexical_rank=r["lexical_rank"],
            lexical_score=None if r["lexical_score"] is None else float(r["lexical_score"]),
            matched_terms=list(r["matched_terms"] or []),
            headline=" ".join(r["headline"].split()) if r["headline"] else None,
        )
        for r in rows
    ]


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
