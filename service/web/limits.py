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

PEEK_SQL = sa.text("""
SELECT hits, extract(epoch FROM expires_at - clock_timestamp()) AS seconds_left
FROM rate_limit_counters
WHERE bucket = :bucket
  AND window_start = to_timestamp(floor(extract(epoch FROM clock_timestamp()) / :seconds) * :seconds)
""")

SWEEP_SQL = sa.text("DELETE FROM rate_limit_counters WHERE expires_at < clock_timestamp()")

# POST endpoint → (scope, the Settings attribute holding its limit). Admins are not limited.
LIMITED_ENDPOINTS = {
    "tickets_api.tickets_create": ("tickets", "rate_limit_tickets"),
    "tickets_api.tickets_feedback": ("feedback", "rate_limit_feedback"),
    "admin.login": ("login", "rate_limit_login"),
    # The help center's forms spend the same budgets as the API they stand for.
    "help.ask": ("tickets", "rate_limit_tickets"),
    "help.solved": ("feedback", "rate_limit_feedback"),
    "help.escalate": ("feedback", "rate_limit_feedback"),
}


@dataclass(frozen=True)
class Count:
    """Hits so far in the current window and seconds until it ends."""

    hits: int
    retry_after: int


def count_hit(session: Session, bucket: str, seconds: int, amount: int = 1) -> Count:
    """Add ``amount`` hits to the bucket's current window; returns the new count."""
    if random.random() < SWEEP_PROBABILITY:
        session.execute(SWEEP_SQL)
    row = session.execute(HIT_SQL, {"bucket": bucket, "seconds": seconds, "amount": amount}).one()
    return Count(hits=row.hits, retry_after=max(1, math.ceil(row.seconds_left)))


def peek(session: Session, bucket: str, seconds: int) -> Count:
    """The bucket's current window without counting a hit (0 hits if none yet)."""
    row = session.execute(PEEK_SQL, {"bucket": bucket, "seconds": seconds}).one_or_none()
    if row is None:
        return Count(hits=0, retry_after=0)
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
    """429 while a username has had ``lockout[0]`` failed logins in the current window (from any address)."""
    count = peek(session, _login_bucket(username), lockout[1])
    if count.hits >= lockout[0]:
        raise too_many("failed logins for this username; it is locked", lockout, count.retry_after)


def count_failed_login(session: Session, username: str, lockout: tuple[int, int]) -> None:
    """Count one failed login against the username (the caller commits)."""
    count_hit(session, _login_bucket(username), lockout[1])
