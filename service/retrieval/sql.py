"""SQL that fetches ranked articles, exact over every eligible article. Takes a vector, never text.

One statement per retrieval mode, assembled from named CTE fragments by ``build_statement``:
- ``eligible``: articles whose own vector is from the active model (the only ones search returns),
  with their recency (and, when there is a query vector, their own vector's cosine);
- ``vector_leg``: an article's similarity is the best of its own vector's and its sections' cosine
  (``granularity="article"``: its own vector only), and which section that was;
- ``lexical_ranked``: full-text matches with ts_rank (+1 when every word matched), all of them (no LIMIT:
  a match that recency × importance lifts is never dropped; the caller's statement_timeout bounds it);
- ``fused``: the relevance that enters ``score = relevance×w_s + recency×w_r×importance``;
- the final SELECT orders every eligible row by score (ties by id), then reads titles and the matched
  section for the top-k only: wide columns are never sorted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import RetrievalSettings  # built from the settings with them; re-exported here
from service.db.engine import READ_REPLICA
from service.retrieval.bm25 import LEXICAL_LEG
from service.retrieval.fragments import ELIGIBLE_WHERE, RECENCY
from service.retrieval.fusion import normalised_fusion
from service.retrieval.ranking import RankingWeights, final_score
from service.retrieval.walk import WalkResult, section_estimate, walk_candidates

MODES = ("vector", "lexical", "hybrid")
GRANULARITIES = ("section", "article")
# "convex": w·cosine + (1−w)·BM25/max; "minmax" and "zscore": both legs normalised over every eligible article
# (BM25 0 where no term matches), then w·vector + (1−w)·lexical; "rrf": weighted reciprocal rank fusion.
FUSIONS = ("convex", "rrf", "minmax", "zscore")

def _eligible(*, with_vector: bool, lexical_only: bool, candidates: bool = False) -> str:
    card = "1.0 - (kb.embedding <=> CAST(:query_vector AS vector))" if with_vector else "NULL::double precision"
    matches = "\n      AND kb.search_vector @@ CAST(:tsquery AS tsquery)" if lexical_only else ""
    if candidates:  # the exact walk's candidates (service.retrieval.walk), re-scored exactly
        matches += "\n      AND kb.id = ANY(CAST(:candidate_ids AS bigint[]))"
    return f"""eligible AS MATERIALIZED (
    SELECT kb.id, kb.importance, kb.created_at, {RECENCY} AS recency, {card} AS card_similarity
    FROM knowledge_base kb
    WHERE {ELIGIBLE_WHERE}{matches}
)"""


def _vector_leg(granularity: str) -> str:
    if granularity == "article":
        return """vector_leg AS (
    SELECT id, card_similarity AS similarity, NULL::bigint AS section_id,
           NULL::double precision AS section_similarity
    FROM eligible
)"""
    return """section_hits AS (
    SELECT s.article_id, s.id, s.ordinal, s.embedding <=> CAST(:query_vector AS vector) AS distance
    FROM knowledge_sections s JOIN eligible e ON e.id = s.article_id
    WHERE s.embedding IS NOT NULL AND s.embedding_model = :model
),
best_section AS (
    SELECT DISTINCT ON (article_id) article_id, id AS section_id, 1.0 - distance AS section_similarity
    FROM section_hits
    ORDER BY article_id, distance, ordinal
),
vector_leg AS (
    SELECT e.id, GREATEST(e.card_similarity, coalesce(b.section_similarity, -1.0)) AS similarity,
           b.section_id, b.section_similarity
    FROM eligible e LEFT JOIN best_section b ON b.article_id = e.id
)"""


_LEXICAL_RANKED = """lexical_ranked AS (
    SELECT id, lexical_score, lexical_section_id,
           row_number() OVER (ORDER BY lexical_score DESC, id) AS lexical_rank,
           lexical_score / NULLIF(max(lexical_score) OVER (), 0) AS lexical_norm
    FROM lexical
)"""

_NO_VECTOR_LEG = """vector_leg AS (
    SELECT id, NULL::double precision AS similarity, NULL::bigint AS section_id,
           NULL::double precision AS section_similarity
    FROM eligible
)"""

_RRF_RANKS = """vector_ranked AS (
    SELECT id, row_number() OVER (ORDER BY similarity DESC, id) AS vector_rank FROM vector_leg
)"""


def _fused(mode: str, fusion: str) -> str:
    """Relevance per mode; ``vector_rank`` exists only where RRF needs it (else computed for the top-k)."""
    if mode == "vector":
        return """fused AS (
    SELECT e.id, e.importance, e.created_at, e.recency, v.similarity, v.section_id, v.section_similarity,
           v.similarity AS relevance, NULL::double precision AS lexical_score, NULL::bigint AS lexical_rank,
           NULL::bigint AS lexical_section_id
    FROM eligible e JOIN vector_leg v ON v.id = e.id
)"""
    if mode == "hybrid" and fusion in ("minmax", "zscore"):
        return normalised_fusion(fusion)
    if mode == "lexical":
        relevance, join = "coalesce(l.lexical_norm, 0.0)", "JOIN lexical_ranked l ON l.id = e.id"
    elif fusion == "rrf":
        relevance = ("(:vector_weight / (:rrf_k + r.vector_rank)"
                     " + coalesce((1.0 - :vector_weight) / (:rrf_k + l.lexical_rank), 0.0)) * (:rrf_k + 1.0)")
        join = "LEFT JOIN lexical_ranked l ON l.id = e.id JOIN vector_ranked r ON r.id = e.id"
    else:
        relevance = ":vector_weight * v.similarity + (1.0 - :vector_weight) * coalesce(l.lexical_norm, 0.0)"
        join = "LEFT JOIN lexical_ranked l ON l.id = e.id"
    return f"""fused AS (
    SELECT e.id, e.importance, e.created_at, e.recency, v.similarity, v.section_id, v.section_similarity,
           {relevance} AS relevance, l.lexical_score, l.lexical_rank, l.lexical_section_id
    FROM eligible e JOIN vector_leg v ON v.id = e.id {join}
)"""


def _final_select(*, lexical: bool, with_vector: bool) -> str:
    """Score and order every fused row; read titles, ranks, the matched section and evidence for the top-k."""
    # The matched section: the vector's best; without one, the section whose words match the query best.
    section_order = "(s.id = top.section_id) DESC NULLS LAST, "
    if lexical:  # else the unit that gave the article its BM25, else the best ts_rank
        section_order += "(s.id = top.lexical_section_id) DESC NULLS LAST, "
        section_order += "ts_rank(to_tsvector('english', s.content), CAST(:tsquery AS tsquery)) DESC, "
    vector_rank = ("""(SELECT count(*) + 1 FROM vector_leg o
            WHERE o.similarity > top.similarity OR (o.similarity = top.similarity AND o.id < top.id))"""
                   if with_vector else "NULL::bigint")
    evidence = """ARRAY(SELECT u.lexeme FROM unnest(kb.search_vector) AS u
             WHERE u.lexeme = ANY(CAST(:lexemes AS text[]))) AS matched_terms,
       CASE WHEN top.lexical_rank IS NOT NULL THEN
           ts_headline('english', coalesce(sec.content, kb.content),
                       CASE WHEN kb.search_vector @@ CAST(:and_tsquery AS tsquery)
                            THEN CAST(:and_tsquery AS tsquery) ELSE CAST(:tsquery AS tsquery) END,
                       'MaxFragments=1, MinWords=12, MaxWords=30, StartSel=**, StopSel=**')
       END AS headline""" if lexical else "ARRAY[]::text[] AS matched_terms, NULL::text AS headline"
    return f"""top AS (
    SELECT *, relevance * :similarity_weight + recency * :recency_weight * importance AS score
    FROM fused
    ORDER BY score DESC, id
    LIMIT :limit
)
SELECT top.id, kb.title, kb.category, top.importance, top.created_at, top.similarity, top.recency,
       top.relevance, top.section_similarity, top.lexical_score, top.lexical_rank,
       {vector_rank} AS vector_rank,
       sec.id AS section_id, sec.heading_path, sec.content AS section_text,
       {evidence}
FROM top
JOIN knowledge_base kb ON kb.id = top.id
LEFT JOIN LATERAL (
    SELECT s.id, s.heading_path, s.content FROM knowledge_sections s
    WHERE s.article_id = top.id
    ORDER BY {section_order}s.ordinal
    LIMIT 1
) sec ON true
ORDER BY top.score DESC, top.id"""


@lru_cache(maxsize=None)
def build_statement(mode: str, *, fusion: str = "convex", granularity: str = "section",
                    with_vector: bool = True, candidates: bool = False) -> sa.TextClause:
    """The one statement for this mode; ``with_vector=False`` is the lexical leg alone (embedder down);
    ``candidates=True`` ranks only the articles in ``:candidate_ids``."""
    if mode not in MODES or fusion not in FUSIONS or granularity not in GRANULARITIES:
        raise ValueError(f"unknown retrieval settings: {mode}, {fusion}, {granularity}")
    if mode != "lexical" and not with_vector:
        raise ValueError(f"{mode} mode needs a query vector")
    lexical = mode != "vector"
    ctes = [_eligible(with_vector=with_vector, lexical_only=mode == "lexical", candidates=candidates),
            _vector_leg(granularity) if with_vector else _NO_VECTOR_LEG]
    if lexical:
        ctes += [LEXICAL_LEG, _LEXICAL_RANKED]
    if mode == "hybrid" and fusion == "rrf":
        ctes.append(_RRF_RANKS)
    ctes.append(_fused(mode, fusion))
    sql = "WITH " + ",\n".join(ctes) + ",\n" + _final_select(lexical=lexical, with_vector=with_vector)
    binds = [sa.bindparam("now", type_=sa.DateTime(timezone=True)),
             sa.bindparam("window_days", type_=sa.Double),
             sa.bindparam("similarity_weight", type_=sa.Double),
             sa.bindparam("recency_weight", type_=sa.Double)]
    if lexical:
        binds += [sa.bindparam("bm25_k1", type_=sa.Double), sa.bindparam("bm25_b", type_=sa.Double)]
    if mode == "hybrid":
        binds.append(sa.bindparam("vector_weight", type_=sa.Double))
    if mode == "hybrid" and fusion == "rrf":
        binds.append(sa.bindparam("rrf_k", type_=sa.Double))
    return sa.text(sql).bindparams(*binds).execution_options(**{READ_REPLICA: True})


# The AND query decides between AND and OR: how many articles match every word?
COUNT_MATCHES_SQL = sa.text(f"""
SELECT count(*) FROM (
    SELECT 1 FROM knowledge_base kb
    WHERE kb.search_vector @@ CAST(:tsquery AS tsquery) AND {ELIGIBLE_WHERE}
    LIMIT :enough
) AS matches
""").execution_options(**{READ_REPLICA: True})


@dataclass(frozen=True)
class RankedRow:
    """A ranked article with every part of its score, the matched section and each leg's evidence."""

    id: int
    title: str
    category: str | None
    importance: float
    created_at: datetime
    similarity: float | None
    recency: float
    relevance: float
    score: float
    section_id: int | None
    section_path: tuple[str, ...]
    section_text: str | None
    section_similarity: float | None
    vector_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    matched_terms: list[str]
    headline: str | None  # ts_headline fragment of the matched section, matched words in **bold**


def _float(value) -> float | None:
    return None if value is None else float(value)


def rank_articles(session: Session, query_vector: np.ndarray | None, *, model: str, limit: int,
                  weights: RankingWeights, retrieval: RetrievalSettings, now: datetime,
                  tsquery: str | None = None, and_tsquery: str | None = None, lexemes: list[str] | None = None,
                  source_prefix: str | None = None) -> list[RankedRow]:
    """The exact top-``limit`` articles for this mode; ``source_prefix`` keeps articles imported from there.

    The lexical leg scores ``lexemes`` (service.retrieval.bm25) among the articles ``tsquery`` matches.
    """
    walk = _walk(session, query_vector, model=model, limit=limit, weights=weights, retrieval=retrieval, now=now,
                 source_prefix=source_prefix, tsquery=tsquery)
    statement = build_statement(retrieval.mode, fusion=retrieval.fusion, granularity=retrieval.granularity,
                                with_vector=query_vector is not None, candidates=walk is not None)
    params = {
        "query_vector": None if query_vector is None else np.asarray(query_vector, dtype=np.float32),
        "tsquery": tsquery, "and_tsquery": and_tsquery or tsquery, "lexemes": lexemes or [],
        "model": model, "limit": limit, "now": now, "window_days": weights.recency_window_days,
        "similarity_weight": weights.similarity_weight, "recency_weight": weights.recency_weight,
        "vector_weight": retrieval.vector_weight, "rrf_k": retrieval.rrf_k, "source_prefix": source_prefix,
        "terms": lexemes or [], "bm25_k1": retrieval.bm25_k1, "bm25_b": retrieval.bm25_b,
        "candidate_ids": walk.candidate_ids if walk else None,
    }
    rows = session.execute(statement, params).mappings()
    return [RankedRow(
        id=r["id"], title=r["title"], category=r["category"], importance=r["importance"],
        created_at=r["created_at"], similarity=_float(r["similarity"]), recency=float(r["recency"]),
        relevance=float(r["relevance"]),
        # Recomputed by the pure function: the SQL orders, Python is the reference.
        score=final_score(float(r["relevance"]), float(r["recency"]), r["importance"], weights),
        section_id=r["section_id"], section_path=tuple(r["heading_path"] or ()), section_text=r["section_text"],
        # Rank by similarity alone needs every article's cosine, which a walk does not read: None after one.
        section_similarity=_float(r["section_similarity"]), vector_rank=None if walk else r["vector_rank"],
        lexical_rank=r["lexical_rank"], lexical_score=_float(r["lexical_score"]),
        matched_terms=list(r["matched_terms"] or []),
        headline=" ".join(r["headline"].split()) if r["headline"] else None,
    ) for r in rows]


# Every eligible article the lexical leg matches: in convex hybrid mode they are all re-scored with the walk's.
LEXICAL_IDS_SQL = sa.text(f"""
SELECT kb.id FROM knowledge_base kb
WHERE {ELIGIBLE_WHERE} AND kb.search_vector @@ CAST(:tsquery AS tsquery)
""").execution_options(**{READ_REPLICA: True})


def _walk(session: Session, query_vector: np.ndarray | None, *, model: str, limit: int, weights: RankingWeights,
          retrieval: RetrievalSettings, now: datetime, source_prefix: str | None,
          tsquery: str | None) -> WalkResult | None:
    """The exact walk's candidates when this mode can use it on a table this size, else None (exact scan).

    Vector mode walks the formula as it is. Convex hybrid mode: an article no full-text match touches scores
    ``w_s × w × cosine + boost`` (its lexical part is 0), so the walk runs with ``w_s × w`` and every lexical
    match joins the candidates (the statement then normalises the lexical leg over all of them, as the scan
    does). RRF needs every article's vector rank, which only the scan has.
    """
    convex_hybrid = retrieval.mode == "hybrid" and retrieval.fusion == "convex"
    if ((retrieval.mode != "vector" and not convex_hybrid) or query_vector is None or retrieval.walk_budget <= 0
            or limit < 1):
        return None
    if section_estimate(session) < retrieval.index_min_rows:
        return None
    walk_weights = weights if not convex_hybrid else replace(
        weights, similarity_weight=weights.similarity_weight * retrieval.vector_weight)
    walk = walk_candidates(session, query_vector, model=model, limit=limit, weights=walk_weights, now=now,
                           budget=retrieval.walk_budget, granularity=retrieval.granularity,
                           source_prefix=source_prefix)
    if walk is None or not convex_hybrid or not tsquery:
        return walk
    matches = session.execute(LEXICAL_IDS_SQL, {"tsquery": tsquery, "model": model,
                                                "source_prefix": source_prefix}).scalars()
    return replace(walk, candidate_ids=sorted(set(walk.candidate_ids).union(matches)))


def search_by_vector(session: Session, query_vector: np.ndarray, *, model: str, limit: int,
                     weights: RankingWeights, now: datetime, source_prefix: str | None = None,
                     granularity: str = "section") -> list[RankedRow]:
    """The exact top-``limit`` articles for ``query_vector`` among articles embedded by ``model``."""
    return rank_articles(session, query_vector, model=model, limit=limit, weights=weights, now=now,
                         retrieval=RetrievalSettings(granularity=granularity), source_prefix=source_prefix)


def count_lexical_matches(session: Session, tsquery: str, *, model: str, enough: int,
                          source_prefix: str | None = None) -> int:
    """Matches of ``tsquery``, counted up to ``enough``."""
    return session.execute(COUNT_MATCHES_SQL, {"tsquery": tsquery, "model": model, "enough": enough,
                                               "source_prefix": source_prefix}).scalar_one()
