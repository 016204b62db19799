"""Pure bounds for the exact walk: the most a group of rows can score, from what the group is, not its rows.

A row's score is ``w_s × cos(q, row) + w_r × importance × recency`` (its article's importance and recency).
The walk groups rows by (cluster, importance bucket, week of creation) and bounds each group from above:

- cosine: every vector of a cluster lies within ``radius`` (an angle) of its centroid, so by the triangle
  inequality on the sphere ``angle(q, row) ≥ angle(q, centroid) − radius`` and
  ``cos(q, row) ≤ cos(max(0, angle(q, centroid) − radius))``;
- boost: importance is below the bucket's ceiling, and a row created in period ``p`` is at least as old as the
  period's end, so its recency is at most the recency of that end (recency only falls with age).

The same bucket and period are computed by PostgreSQL (``boost_bucket()``, ``boost_period()``, migration 0010);
``tests/test_cluster_walk.py`` checks they agree.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from service.db.models import IMPORTANCE_MAX
from service.retrieval.ranking import RankingWeights, recency

# Narrow units keep the ceilings tight: at most 0.2 × 1/16 of importance and 0.2 × 2 × 7/365 of recency above
# any row's boost (0.021 in score); steps of 0.25 and 30 days allowed 0.083, and the walk read 519 rows per
# query at 100k × 5 instead of 278 (bench/search.py, median).
BUCKET_WIDTH = 0.0625
LAST_BUCKET = 31
BUCKETS = range(LAST_BUCKET + 1)
PERIOD_SECONDS = 604_800  # 7 days
ALL_PERIODS = -(2**31)      # lowest int4: a range that starts here takes every period
NO_PERIOD = 2**31 - 1       # highest int4: a range that ends here has no upper end
# pgvector accumulates cosines in single precision: a computed cosine may exceed the true one by ~1e-6.
COSINE_SLACK = 1e-5
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def boost_bucket(importance: float) -> int:
    """Importance in steps of 1/16 (0–31): PostgreSQL's ``boost_bucket()``."""
    return min(max(math.floor(importance / BUCKET_WIDTH), 0), LAST_BUCKET)


def boost_period(created_at: datetime) -> int:
    """The week since 1970 of ``created_at``: PostgreSQL's ``boost_period()``."""
    return math.floor((created_at - EPOCH).total_seconds() / PERIOD_SECONDS)


def bucket_ceiling(bucket: int) -> float:
    """The largest importance a bucket holds."""
    return min((bucket + 1) * BUCKET_WIDTH, IMPORTANCE_MAX) if bucket < LAST_BUCKET else IMPORTANCE_MAX


def period_recency_ceiling(period: int, now: datetime, weights: RankingWeights) -> float:
    """The largest recency of a row created in ``period``: that of the period's last instant."""
    end = (period + 1) * PERIOD_SECONDS
    return recency(((now - EPOCH).total_seconds() - end) / 86_400.0, weights.recency_window_days)


def cosine_ceiling(angle_to_centroid: float, radius: float) -> float:
    """The largest cosine between the query and any vector within ``radius`` of a centroid at that angle."""
    return min(1.0, math.cos(max(0.0, angle_to_centroid - radius))) + COSINE_SLACK


def first_period(needed_boost: float, bucket: int, now: datetime, weights: RankingWeights) -> int | None:
    """The earliest period whose rows of ``bucket`` can reach ``w_r × importance × recency ≥ needed_boost``:
    ``ALL_PERIODS`` if any row can (the boost is never negative), None if none can. One period lower than the
    exact answer, so rounding never drops a period that qualifies (reading more rows is always safe)."""
    if needed_boost <= 0.0:
        return ALL_PERIODS
    ceiling = weights.recency_weight * bucket_ceiling(bucket)
    if ceiling <= 0.0 or needed_boost > ceiling:
        return None
    needed_recency = needed_boost / ceiling  # in (0, 1]
    latest_age_seconds = (1.0 - needed_recency) * weights.recency_window_days * 86_400.0
    earliest_end = (now - EPOCH).total_seconds() - latest_age_seconds
    return math.ceil(earliest_end / PERIOD_SECONDS) - 2


def unit_score_ceiling(cosine: float, bucket: int, period: int, now: datetime, weights: RankingWeights) -> float:
    """The most a row of this cluster (cosine ceiling), bucket and period can score."""
    return (weights.similarity_weight * cosine
            + weights.recency_weight * bucket_ceiling(bucket) * period_recency_ceiling(period, now, weights))
