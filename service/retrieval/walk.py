"""The exact walk: the articles that can be in the top-k, found by reading only rows whose bound can reach it.

Every vector (an article's own, and its sections') belongs to a *unit*: its k-means cluster (``cluster_id``,
or none yet) × its article's importance bucket × the week of its creation (migration 0010). service.retrieval
.bounds gives each unit a ceiling on any of its rows' scores: ``w_s × cos ceiling of the cluster (centroid,
radius) + w_r × bucket ceiling × recency of the period's end``. The walk then reads, in rounds of falling
threshold ``T``, every row of every unit whose ceiling reaches ``T`` (one statement per round: range scans of
the (cluster_id, boost_bucket, boost_period) btree, the exact cosine of just those rows), and stops once the
k-th best score among the articles read is ≥ ``T``: every unread row scores below ``T``, so no unread article
can reach the top-k, nor tie it. The articles read whose score reaches the k-th best are re-scored by the exact
statement (``sql.build_statement(..., candidates=True)``), over all their sections, so the result *is* the
exact scan's, ties by id included. This is a proof, not a recall figure: no graph index is involved.

When clusters are tight and the boost varies (the usual help center: a few topics per question, importance and
age spread), the walk reads a few hundred rows; when nothing bounds well (one topic, or vectors spread evenly),
it reads more and, past ``budget`` rows, hands over to the exact scan. Rows not yet assigned to a cluster are
always read (their cosine ceiling is 1), so new articles are found before the next ``supportrag db cluster``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.engine import READ_REPLICA
from service.db.models import IMPORTANCE_MAX
from service.knowledge.clusters import CENTROIDS
from service.retrieval.bounds import (
    BUCKETS,
    COSINE_SLACK,
    NO_PERIOD,
    cosine_ceiling,
    first_period,
)
from service.retrieval.fragments import ELIGIBLE_WHERE, RECENCY
from service.retrieval.ranking import RankingWeights, kth_largest

FIRST_STEP = 0.03    # the first threshold: this far below the best ceiling (in score units)
SCORE_TOLERANCE = 1e-9

def _on_replica(statement: str) -> sa.TextClause:
    """A walk statement: every one of them runs where the search runs (the read replica, if any)."""
    return sa.text(statement).execution_options(**{READ_REPLICA: True})


CLUSTERS_SQL = _on_replica("SELECT id, created_at, radius FROM vector_clusters WHERE model = :model ORDER BY id")
CENTROIDS_SQL = _on_replica(
    "SELECT id, created_at, centroid FROM vector_clusters WHERE id = ANY(CAST(:ids AS int[]))")
SECTION_ESTIMATE_SQL = _on_replica(
    "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'knowledge_sections'::regclass")


def _branch(table: str, id_column: str, units: str, join: str) -> str:
    return f"""SELECT t.{id_column} AS id, t.embedding <=> CAST(:query_vector AS vector) AS distance
    FROM {units} u JOIN {table} t
      ON {join} AND t.boost_bucket = u.bucket AND t.boost_period >= u.lo AND t.boost_period < u.hi
    WHERE t.embedding_model = :model AND t.embedding IS NOT NULL"""


def _round_sql(with_sections: bool) -> sa.TextClause:
    """One round: the rows of the given units (clustered and not yet clustered), at most ``:cap`` of them, and
    for each eligible article read its best cosine and its boost."""
    tables = [("knowledge_base", "id")] + ([("knowledge_sections", "article_id")] if with_sections else [])
    branches = []
    for table, id_column in tables:
        branches.append(_branch(table, id_column, "units", "t.cluster_id = u.cluster_id"))
        branches.append(_branch(table, id_column, "free_units", "t.cluster_id IS NULL"))
    hits = "\n    UNION ALL\n    ".join(branches)
    return sa.text(f"""
WITH units AS (
    SELECT * FROM unnest(CAST(:clusters AS int[]), CAST(:buckets AS int[]), CAST(:los AS int[]),
                         CAST(:his AS int[])) AS u(cluster_id, bucket, lo, hi)
),
free_units AS (
    SELECT * FROM unnest(CAST(:free_buckets AS int[]), CAST(:free_los AS int[]), CAST(:free_his AS int[]))
        AS u(bucket, lo, hi)
),
hits AS MATERIALIZED (
    {hits}
    LIMIT :cap
),
best AS (
    SELECT b.id, 1.0 - b.distance AS similarity, kb.importance * {RECENCY} AS boost
    FROM (SELECT id, min(distance) AS distance FROM hits GROUP BY id) b JOIN knowledge_base kb ON kb.id = b.id
    WHERE {ELIGIBLE_WHERE}
)
SELECT best.id, best.similarity, best.boost, c.read
FROM (SELECT count(*) AS read FROM hits) c LEFT JOIN best ON true
""").bindparams(sa.bindparam("now", type_=sa.DateTime(timezone=True)),
                sa.bindparam("window_days", type_=sa.Double)).execution_options(**{READ_REPLICA: True})


ROUND_SQL = {True: _round_sql(True), False: _round_sql(False)}


@dataclass(frozen=True)
class WalkResult:
    """The articles that can be in the top-k, how many rows were read, and in how many rounds."""

    candidate_ids: list[int]
    walked_rows: int
    rounds: int




def cluster_ceilings(session: Session, query_vector: np.ndarray, model: str) -> dict[int | None, float]:
    """Each cluster's cosine ceiling for this query (``None``: rows not assigned to a cluster, ceiling 1)."""
    clusters = session.execute(CLUSTERS_SQL, {"model": model}).all()
    ceilings: dict[int | None, float] = {None: 1.0 + COSINE_SLACK}
    if not clusters:
        return ceilings
    query = np.asarray(query_vector, dtype=np.float64)
    query = query / np.linalg.norm(query)
    keys = [(cluster_id, created) for cluster_id, created, _ in clusters]
    cosines = np.clip(CENTROIDS.get(session, keys, CENTROIDS_SQL) @ query, -1.0, 1.0)
    for (cluster_id, _, radius), cosine in zip(clusters, cosines):
        ceilings[cluster_id] = cosine_ceiling(math.acos(float(cosine)), float(radius))
    return ceilings


def _period_range(cosine: float, bucket: int, threshold: float, previous: float | None, now: datetime,
                  weights: RankingWeights) -> tuple[int, int] | None:
    """The periods of a unit whose ceiling reaches ``threshold`` but not ``previous`` (read in earlier rounds)."""
    lo = first_period(threshold - weights.similarity_weight * cosine, bucket, now, weights)
    if lo is None:
        return None
    hi = NO_PERIOD
    if previous is not None:
        done_from = first_period(previous - weights.similarity_weight * cosine, bucket, now, weights)
        if done_from is not None:
            hi = done_from
    return (lo, hi) if lo < hi else None


def _units(ceilings: dict[int | None, float], threshold: float, previous: float | None, now: datetime,
           weights: RankingWeights) -> tuple[dict[str, list[int]], int]:
    """The statement's unit arrays for the rows whose ceiling is in [threshold, previous)."""
    arrays: dict[str, list[int]] = {name: [] for name in
                                    ("clusters", "buckets", "los", "his", "free_buckets", "free_los", "free_his")}
    count = 0
    most = weights.recency_weight * IMPORTANCE_MAX
    for cluster_id, cosine in ceilings.items():
        if weights.similarity_weight * cosine + most < threshold:
            continue  # nothing in this cluster can reach the threshold
        for bucket in BUCKETS:
            periods = _period_range(cosine, bucket, threshold, previous, now, weights)
            if periods is None:
                continue
            count += 1
            if cluster_id is None:
                arrays["free_buckets"].append(bucket)
                arrays["free_los"].append(periods[0])
                arrays["free_his"].append(periods[1])
            else:
                arrays["clusters"].append(cluster_id)
                arrays["buckets"].append(bucket)
                arrays["los"].append(periods[0])
                arrays["his"].append(periods[1])
    return arrays, count


def walk_candidates(session: Session, query_vector: np.ndarray, *, model: str, limit: int,
                    weights: RankingWeights, now: datetime, budget: int, granularity: str = "section",
                    source_prefix: str | None = None) -> WalkResult | None:
    """The articles that can be in the exact top-``limit`` (a superset; re-score them exactly), or None when
    the walk would read more than ``budget`` rows (scan instead)."""
    if weights.similarity_weight < 0 or weights.recency_weight < 0 or limit < 1 or not np.any(query_vector):
        return None
    ceilings = cluster_ceilings(session, query_vector, model)
    statement = ROUND_SQL[granularity == "section"]
    best_ceiling = weights.similarity_weight * max(ceilings.values()) + weights.recency_weight * IMPORTANCE_MAX
    params = {"query_vector": np.asarray(query_vector, dtype=np.float32), "model": model, "now": now,
              "window_days": weights.recency_window_days, "source_prefix": source_prefix}
    scores: dict[int, float] = {}  # each article read: its best score so far
    read, rounds, previous = 0, 0, None
    threshold, step = best_ceiling - FIRST_STEP, FIRST_STEP
    while True:
        arrays, count = _units(ceilings, threshold, previous, now, weights)
        if count:
            rounds += 1
            rows = session.execute(statement, {**params, **arrays, "cap": budget - read + 1}).all()
            read += rows[0].read  # one row at least: the count, with or without an article
            if read > budget:
                return None
            for row in rows:  # an article's boost is fixed, so its best score is that of its best cosine
                if row.id is not None:
                    score = weights.similarity_weight * row.similarity + weights.recency_weight * row.boost
                    scores[row.id] = max(scores.get(row.id, -math.inf), score)
        kth = kth_largest(list(scores.values()), limit)
        if kth is not None and kth >= threshold:
            break  # every unread row scores below the threshold, hence below the k-th best read
        if threshold < -weights.similarity_weight:
            break  # below any score: everything has been read
        previous = threshold
        # The next threshold: the k-th best read (one more round then settles it), or a step twice as long.
        step *= 2
        threshold = kth if kth is not None and kth > threshold - step else threshold - step
    floor = -math.inf if kth is None else kth - SCORE_TOLERANCE  # the k-th best when the loop stopped
    return WalkResult(candidate_ids=sorted(i for i, s in scores.items() if s >= floor), walked_rows=read,
                      rounds=rounds)


def section_estimate(session: Session) -> int:
    """How many sections the planner thinks there are (0 before the first ANALYZE)."""
    return int(session.execute(SECTION_ESTIMATE_SQL).scalar_one())


