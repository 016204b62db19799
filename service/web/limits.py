"""Abuse limits kept in the database (shared by every gunicorn worker): fixed-window counters per bucket.

A bucket is a scope and a key, e.g. ``tickets:203.0.113.7`` or ``login-failures:lead``. Counting is one
upsert in its own short transaction, so a burst from many workers cannot overshoot the limit.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app, g, request
from sqlalchemy.orm import Session

from service.web.errors import ApiError

SWEEP_PROBABILITY = 0.01  # how often a hit also deletes every expired counter

HIT_SQL = sa.text("""
WITH current_window AS (
    SELECT to_timestamp(floor(extract(epoch FROM clock_timestamp()) / :seconds) * :seconds) AS start
)
INSERT INTO rate_limit_counters (bucket, window_start, hits, expires_at)
SELECT :bucket, start, :amount, start + make_interval(secs => :seconds) FROM current_window
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + EXCLUDED.hits
RETURNING hits, extract(epoch FROM expires_at - clock_timestamp()) AS seconds_left
""")

SWEEP_SQL = sa.text("DELETE FROM rate_limit_counters WHERE expires_at < clock_timestamp()")

# Failed logins per username: one row per bucket (window_start fixed at the epoch) whose window starts at the
# first failure, not at a clock boundary, so failures a second apart always add up; and the failure that reaches
# the limit extends it to a full window from now, so a lock lasts the whole window (a clock-aligned window
# locked for seconds when the limit was reached just before its end).
FAILURE_SQL = sa.text("""
INSERT INTO rate_limit_counters (bucket, window_start, hits, expires_at)
VALUES (:bucket, to_timestamp(0), 1, clock_timestamp() + make_interval(secs => :seconds))
ON CONFLICT (bucket, window_start) DO UPDATE SET
    hits = CASE WHEN rate_limit_counters.expires_at <= clock_timestamp() THEN 1
                ELSE rate_limit_counters.hits + 1 END,
    expires_at = CASE WHEN rate_limit_counters.expires_at <= clock_timestamp()
                           OR rate_limit_counters.hits + 1 >= :limit THEN EXCLUDED.expires_at
                      ELSE rate_limit_counters.expires_at END
""")
FAILURES_SQL = sa.text("""
SELECT hits, extract(epoch FROM expires_at - clock_timestamp()) AS seconds_left
FROM rate_limit_counters
WHERE bucket = :bucket AND window_start = to_timestamp(0) AND expires_at > clock_timestamp()
""")

# POST endpoint → (scope, the Settings attribute holding its limit). Admins are not limited.
LIMITED_ENDPOINTS = {
    "tickets_api.tickets_create": ("tickets", "rate_limit_tickets"),
    "tickets_api.tickets_feedback": ("feedback", "rate_limit_feedback"),
    "admin.login": ("login", "rate_limit_login"),
    # The help center's forms spend the same budgets as the API they stand for.
    "help.ask": ("tickets", "rate_limit_tickets"),
    "help.solved": ("feedback", "rate_limit_feedback"),
    "help.escalate": ("feedback", "rate_limit_feedback"),
    "help.follow_up": ("tickets", "rate_limit_tickets"),  # a follow-up is a new message for an agent
}


@dataclass(frozen=True)
class Count:
    """Hits so far in the current window and seconds until it ends."""

    hits: int
    retry_after: int


def _maybe_sweep(session: Session) -> None:
    """Now and then, delete every expired counter (no background job needed)."""
    if random.random() < SWEEP_PROBABILITY:
        session.execute(SWEEP_SQL)


def count_hit(session: Session, bucket: str, seconds: int, amount: int = 1) -> Count:
    """Add ``amount`` hits to the bucket's current window; returns the new count."""
    _maybe_sweep(session)
    row = session.execute(HIT_SQL, {"bucket": bucket, "seconds": seconds, "amount": amount}).one()
    return Count(hits=row.hits, retry_after=max(1, math.ceil(row.seconds_left)))


def too_many(what: str, limit: tuple[int, int], retry_after: int) -> ApiError:
    """The 429 answer: what was limited, the limit, and when to try again."""
    count, seconds = limit
    return ApiError(429, "rate_limited", f"too many {what}; try again in {retry_after} seconds",
                    {"limit": f"{count} per {seconds} seconds", "retry_after": retry_after},
                    {"Retry-After": str(retry_after)})


def enforce_rate_limits() -> None:
    """Before every request (after access): count a POST to a limited endpoint against the client's address."""
    if request.method != "POST" or request.endpoint not in LIMITED_ENDPOINTS or g.get("identity") is not None:
        return
    scope, setting = LIMITED_ENDPOINTS[request.endpoint]
    runtime = current_app.extensions["supportrag"]
    limit = getattr(runtime.settings, setting)
    if limit is None:
        return
    with runtime.session() as session:
        count = count_hit(session, f"{scope}:{request.remote_addr}", limit[1])
    if count.hits > limit[0]:
        raise too_many(f"{scope} requests from your address", limit, count.retry_after)


def _login_bucket(username: str) -> str:
    """Failed logins are counted per submitted username (hashed: the table never holds what was typed)."""
    digest = hashlib.sha256(username.strip().lower().encode("utf-8", "replace")).hexdigest()[:32]
    return f"login-failures:{digest}"


def refuse_locked_username(session: Session, username: str, lockout: tuple[int, int]) -> None:
    """429 for a full window after a username's ``lockout[0]``-th failed login within a window of the first one
    (failures from any address count)."""
    row = session.execute(FAILURES_SQL, {"bucket": _login_bucket(username)}).one_or_none()
    if row is not None and row.hits >= lockout[0]:
        raise too_many("failed logins for this username; it is locked", lockout,
                       max(1, math.ceil(row.seconds_left)))


def count_failed_login(session: Session, username: str, lockout: tuple[int, int]) -> None:
    """Count one failed login against the username (the caller commits)."""
    _maybe_sweep(session)
    session.execute(FAILURE_SQL, {"bucket": _login_bucket(username), "seconds": lockout[1], "limit": lockout[0]})
