"""SQL that fetches ranked articles, exact over every eligible article. Takes a vector, never text.

One statement per retrieval mode, assembled from named CTE fragments by ``build_statement``:
- ``eligible``: articles whose own vector is from the active model (the only ones search returns),
  with their recency (and, when there is a query vector, their own vector's cosine);
- ``vector_leg``: an article's similarity is the best of its own vector's and its sections' cosine
  (``granularity="article"``: its own vector only), and which section that was. By default the scan reads
  the half-precision vectors and re-scores the candidates in full precision (service.retrieval.vector_legs);
- ``lexical_ranked``: exact BM25 (service.retrieval.bm25). Convex and RRF hybrid: of every full-text match (no
  LIMIT; the caller's statement_timeout bounds it). Z-score and min-max hybrid: of the pool's articles
  (service.retrieval.pool). Lexical mode: of every match that can reach the top-k by the formula,
  recency × importance included (service.retrieval.bm25_prune proves which), so ``eligible`` is then just the
  top-k, and a query vector only reports their cosine and best section (no vector rank: it does not rank);
- ``fused``: the relevance that enters ``score = relevance×w_s + recency×w_r×importance``;
- the final SELECT orders every eligible row by score (ties by id), then reads titles and the matched
  section for the top-k only: wide columns are never sorted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import RetrievalSettings  # built from the settings with them; re-exported here
from service.db.engine import READ_REPLICA
from service.retrieval.approximate import approximate_candidates
from service.retrieval.bm25 import LEXICAL_LEG
from service.retrieval.bm25_prune import formula_leg
from service.retrieval.fragments import ELIGIBLE_WHERE, RECENCY
from service.retrieval.pool import pool_ctes
from service.retrieval.precision import rescore_margin, similarity_margin
from service.retrieval.ranking import RankingWeights, final_score
from service.retrieval.vector_legs import CANDIDATES, card_similarity, exact_leg, half_leg, vector_rank

MODES = ("vector", "lexical", "hybrid")
GRANULARITIES = ("section", "article")
# "convex": w·cosine + (1−w)·BM25/max; "minmax" and "zscore": each leg divided by its spread over the whole base,
# w·vector + (1−w)·lexical over each leg's best articles (service.retrieval.pool); "rrf": weighted reciprocal rank
# fusion.
FUSIONS = ("convex", "rrf", "minmax", "zscore")
NORMALISED = ("minmax", "zscore")

def _eligible(*, precision: str | None, granularity: str, lexical_only: bool, candidates: bool = False) -> str:
    card = card_similarity(precision, granularity) if precision else "NULL::double precision"
    matches = "\n      AND kb.search_vector @@ CAST(:tsquery AS tsquery)" if lexical_only else ""
    if candidates:  # the approximate mode's candidates (service.retrieval.approximate), ranked exactly
        matches += "\n      AND kb.id = ANY(CAST(:candidate_ids AS bigint[]))"
    return f"""eligible AS MATERIALIZED (
    SELECT kb.id, kb.importance, kb.created_at, {RECENCY} AS recency, {card} AS card_similarity
    FROM knowledge_base kb
    WHERE {ELIGIBLE_WHERE}{matches}
)"""


_LEXICAL_RANKED = """lexical_ranked AS (
    SELECT id, lexical_score, lexical_section_id,
           row_number() OVER (ORDER BY lexical_score DESC, id) AS lexical_rank,
           lexical_score / NULLIF(max(lexical_score) OVER (), 0) AS lexical_norm
    FROM lexical
)"""
_LEXICAL_LEG = f"{LEXICAL_LEG},\n{_LEXICAL_RANKED}"


def _lexical_ctes(*, with_vector: bool, granularity: str) -> list[str]:
    """The lexical mode: BM25 pruned to the articles that can reach the top-k by the formula
    (service.retrieval.bm25_prune); ``eligible`` is that top-k, and the query vector (if any) only reports
    their cosine and best section, in full precision (it does not rank here, so it has no rank)."""
    card = card_similarity("full", granularity) if with_vector else "NULL::double precision"
    score = f"l.lexical_norm * :similarity_weight + {RECENCY} * :recency_weight * kb.importance"
    eligible = f"""eligible AS MATERIALIZED (
    SELECT kb.id, kb.importance, kb.created_at, {RECENCY} AS recency, {card} AS card_similarity
    FROM lexical_ranked l JOIN knowledge_base kb ON kb.id = l.id
    ORDER BY {score} DESC, kb.id
    LIMIT :limit
)"""
    vector = exact_leg(granularity, rows="eligible", precision="full") if with_vector else _NO_VECTOR_LEG
    return [formula_leg(), _LEXICAL_RANKED, eligible, vector, _fused("lexical", "convex")]


_NO_VECTOR_LEG = """vector_leg AS (
    SELECT id, NULL::double precision AS similarity, NULL::bigint AS section_id,
           NULL::double precision AS section_similarity
    FROM eligible
)"""

_RRF_RANKS = """vector_ranked AS (
    SELECT id, row_number() OVER (ORDER BY similarity DESC, id) AS vector_rank FROM vector_leg
)"""


def _fused(mode: str, fusion: str, *, name: str = "fused", rows: str = "eligible", leg: str = "vector_leg") -> str:
    """Relevance per mode over ``rows`` and their vector ``leg``; ``vector_rank`` exists only where RRF needs it
    (else computed for the top-k)."""
    if mode == "vector":
        return f"""{name} AS (
    SELECT e.id, e.importance, e.created_at, e.recency, v.similarity, v.section_id, v.section_similarity,
           v.similarity AS relevance, NULL::double precision AS lexical_score, NULL::bigint AS lexical_rank,
           NULL::bigint AS lexical_section_id
    FROM {rows} e JOIN {leg} v ON v.id = e.id
)"""
    if mode == "lexical":
        relevance, join = "coalesce(l.lexical_norm, 0.0)", "JOIN lexical_ranked l ON l.id = e.id"
    elif fusion == "rrf":
        relevance = ("(:vector_weight / (:rrf_k + r.vector_rank)"
                     " + coalesce((1.0 - :vector_weight) / (:rrf_k + l.lexical_rank), 0.0)) * (:rrf_k + 1.0)")
        join = "LEFT JOIN lexical_ranked l ON l.id = e.id JOIN vector_ranked r ON r.id = e.id"
    else:
        relevance = ":vector_weight * v.similarity + (1.0 - :vector_weight) * coalesce(l.lexical_norm, 0.0)"
        join = "LEFT JOIN lexical_ranked l ON l.id = e.id"
    return f"""{name} AS (
    SELECT e.id, e.importance, e.created_at, e.recency, v.similarity, v.section_id, v.section_similarity,
           {relevance} AS relevance, l.lexical_score, l.lexical_rank, l.lexical_section_id
    FROM {rows} e JOIN {leg} v ON v.id = e.id {join}
)"""


def _final_select(*, lexical: bool, rank: str | None) -> str:
    """Score and order every fused row; read titles, ranks, the matched section and evidence for the top-k."""
    # The matched section: the vector's best; without one, the section whose words match the query best.
    section_order = "(s.id = top.section_id) DESC NULLS LAST, "
    if lexical:  # else the unit that gave the article its BM25, else the best ts_rank
        section_order += "(s.id = top.lexical_section_id) DESC NULLS LAST, "
        section_order += "ts_rank(bm25_text_vector(s.content), CAST(:tsquery AS tsquery)) DESC, "
    vector_rank = rank or "NULL::bigint"
    evidence = """ARRAY(SELECT u.lexeme FROM unnest(kb.search_vector) AS u
             WHERE u.lexeme = ANY(CAST(:lexemes AS text[]))) AS matched_terms,
       CASE WHEN top.lexical_rank IS NOT NULL THEN
           ts_headline('supportrag_english', coalesce(sec.content, kb.content),
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


def _vector_ctes(mode: str, fusion: str, granularity: str, precision: str) -> list[str]:
    """Everything between ``eligible`` and ``fused``: the vector leg(s), the lexical leg, the fusion."""
    if mode == "hybrid" and fusion in NORMALISED:
        return pool_ctes(granularity, fusion, precision)
    lexical = [_LEXICAL_LEG] if mode != "vector" else []
    if precision == "full":
        ranks = [_RRF_RANKS] if mode == "hybrid" and fusion == "rrf" else []
        return [exact_leg(granularity, rows="eligible", precision="full"), *lexical, *ranks, _fused(mode, fusion)]
    return [half_leg(granularity), *lexical, _fused(mode, fusion, name="half_fused", leg="half_leg"), CANDIDATES,
            exact_leg(granularity, rows="candidates", precision="half"), _fused(mode, fusion, rows="candidates")]


def statement_precision(mode: str, fusion: str, with_vector: bool) -> str | None:
    """Half precision with a full-precision re-score (vector, convex hybrid, the z-score / min-max pool); RRF
    ranks every article by its full-precision cosine, so it scans in full precision; None without a vector leg."""
    if not with_vector:
        return None
    return "full" if mode == "hybrid" and fusion == "rrf" else "half"


@lru_cache(maxsize=None)
def build_statement(mode: str, *, fusion: str = "convex", granularity: str = "section",
                    with_vector: bool = True, precision: str | None = None,
                    candidates: bool = False) -> sa.TextClause:
    """The one statement for this mode; ``with_vector=False`` is the lexical leg alone (embedder down);
    ``precision`` defaults to ``statement_precision`` ("full": the full-precision scan, the reference);
    ``candidates=True`` ranks only the articles in ``:candidate_ids`` (the approximate mode)."""
    if mode not in MODES or fusion not in FUSIONS or granularity not in GRANULARITIES:
        raise ValueError(f"unknown retrieval settings: {mode}, {fusion}, {granularity}")
    if mode != "lexical" and not with_vector:
        raise ValueError(f"{mode} mode needs a query vector")
    if precision not in (None, "half", "full") or (precision == "half" and fusion == "rrf" and mode == "hybrid"):
        raise ValueError(f"precision {precision!r} does not apply to {mode}/{fusion}")
    precision = (precision or statement_precision(mode, fusion, with_vector)) if with_vector else None
    lexical = mode != "vector"
    pooled = mode == "hybrid" and fusion in NORMALISED
    if mode == "lexical":
        ctes, precision = _lexical_ctes(with_vector=with_vector, granularity=granularity), None
    else:
        # The pool reads the vector leg's spread off the half-precision scan in both precisions: same numbers.
        eligible = _eligible(precision="half" if pooled else precision, granularity=granularity,
                             lexical_only=False, candidates=candidates)
        ctes = [eligible, *_vector_ctes(mode, fusion, granularity, precision)]
    # Among the approximate mode's candidates, a rank by similarity would not be the rank among all articles.
    rank = vector_rank(granularity, precision) if precision and not candidates else None
    sql = "WITH " + ",\n".join(ctes) + ",\n" + _final_select(lexical=lexical, rank=rank)
    binds = [sa.bindparam("now", type_=sa.DateTime(timezone=True)),
             sa.bindparam("window_days", type_=sa.Double),
             sa.bindparam("similarity_weight", type_=sa.Double),
             sa.bindparam("recency_weight", type_=sa.Double)]
    if precision == "half":
        binds.append(sa.bindparam("similarity_margin", type_=sa.Double))
    if precision == "half" and not pooled:
        binds.append(sa.bindparam("margin", type_=sa.Double))
    if pooled:
        binds.append(sa.bindparam("pool", type_=sa.Integer))
    if pooled and precision == "half":
        binds.append(sa.bindparam("pool_margin", type_=sa.Double))
    if lexical:
        binds += [sa.bindparam(name, type_=sa.Double) for name in ("bm25_k1", "bm25_b", "bm25_title_weight")]
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


def is_approximate(retrieval: RetrievalSettings, with_vector: bool) -> bool:
    """Whether this search takes the approximate mode (opted in, vector mode, a query vector)."""
    return retrieval.approximate and retrieval.mode == "vector" and with_vector


def _margins(query_vector: np.ndarray, weights: RankingWeights, retrieval: RetrievalSettings) -> dict[str, float]:
    """The half-precision statement's re-score margins for this query's width and this formula."""
    vector_weight = {"vector": 1.0, "hybrid": retrieval.vector_weight, "lexical": 0.0}[retrieval.mode]
    width = len(query_vector)
    return {"margin": rescore_margin(width, similarity_weight=weights.similarity_weight, vector_weight=vector_weight),
            "similarity_margin": similarity_margin(width),
            "pool_margin": rescore_margin(width, similarity_weight=1.0), "pool": retrieval.pool}


def rank_articles(session: Session, query_vector: np.ndarray | None, *, model: str, limit: int,
                  weights: RankingWeights, retrieval: RetrievalSettings, now: datetime,
                  tsquery: str | None = None, and_tsquery: str | None = None, lexemes: list[str] | None = None,
                  source_prefix: str | None = None, precision: str | None = None) -> list[RankedRow]:
    """The exact top-``limit`` articles for this mode; ``source_prefix`` keeps articles imported from there.

    The lexical leg scores ``lexemes`` (service.retrieval.bm25) among the articles ``tsquery`` matches.
    ``query_vector`` is at the model's own width (no padding); ``precision="full"`` forces the full-precision
    scan (the reference the default statement is proven equal to)."""
    with_vector = query_vector is not None
    candidate_ids = None
    if is_approximate(retrieval, with_vector) and precision is None:
        candidate_ids = approximate_candidates(session, query_vector, model=model,
                                               candidates=retrieval.approximate_candidates,
                                               ef_search=retrieval.ef_search)
        precision = "full"
    statement = build_statement(retrieval.mode, fusion=retrieval.fusion, granularity=retrieval.granularity,
                                with_vector=with_vector, precision=precision, candidates=candidate_ids is not None)
    params = {
        "query_vector": None if query_vector is None else np.asarray(query_vector, dtype=np.float32),
        "tsquery": tsquery, "and_tsquery": and_tsquery or tsquery, "lexemes": lexemes or [],
        "model": model, "limit": limit, "now": now, "window_days": weights.recency_window_days,
        "similarity_weight": weights.similarity_weight, "recency_weight": weights.recency_weight,
        "vector_weight": retrieval.vector_weight, "rrf_k": retrieval.rrf_k, "source_prefix": source_prefix,
        "terms": lexemes or [], "bm25_k1": retrieval.bm25_k1, "bm25_b": retrieval.bm25_b,
        "bm25_title_weight": retrieval.bm25_title_weight,
        "candidate_ids": candidate_ids, **(_margins(query_vector, weights, retrieval) if with_vector else {}),
    }
    rows = session.execute(statement, params).mappings()
    return [RankedRow(
        id=r["id"], title=r["title"], category=r["category"], importance=r["importance"],
        created_at=r["created_at"], similarity=_float(r["similarity"]), recency=float(r["recency"]),
        relevance=float(r["relevance"]),
        # Recomputed by the pure function: the SQL orders, Python is the reference.
        score=final_score(float(r["relevance"]), float(r["recency"]), r["importance"], weights),
        section_id=r["section_id"], section_path=tuple(r["heading_path"] or ()), section_text=r["section_text"],
        section_similarity=_float(r["section_similarity"]), vector_rank=r["vector_rank"],
        lexical_rank=r["lexical_rank"], lexical_score=_float(r["lexical_score"]),
        matched_terms=list(r["matched_terms"] or []),
        headline=" ".join(r["headline"].split()) if r["headline"] else None,
    ) for r in rows]


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
