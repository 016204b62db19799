"""Abuse limits kept in the database (shared by every gunicorn worker): fixed-window counters per bucket.

A bucket is a scope and a key, e.g. ``tickets:203.0.113.7`` or ``login-failures:lead``. Counting is one
upsert in its own short transaction, so a burst from many workers cannot overshoot the limit.
"""

from __future__ import annotations

import hashlib
import math
import random
import unicodedata
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

# Failed logins per (normalised username, client address), OWASP style: a pair may fail ``limit`` times, then
# waits a window, then twice as long after its next failure, and so on (capped at a day). Each attempt is counted
# before the password is checked, in one upsert that refuses while the pair is waiting, so simultaneous attempts
# cannot all get through; a success deletes the row. Another address is not held up: no lockout as a service.
_FAILURES = "CASE WHEN t.expires_at <= clock_timestamp() THEN 1 ELSE t.failures + 1 END"
_LOCK = """CASE WHEN {failures} >= :limit
    THEN clock_timestamp() + make_interval(secs => least(:seconds * power(2, least({failures} - :limit, 20)), 86400))
    ELSE clock_timestamp() END"""
ATTEMPT_SQL = sa.text(f"""
INSERT INTO login_throttles AS t (bucket, failures, locked_until, expires_at)
VALUES (:bucket, 1, {_LOCK.format(failures="1")}, {_LOCK.format(failures="1")} + make_interval(secs => :seconds))
ON CONFLICT (bucket) DO UPDATE SET
    failures = {_FAILURES},
    locked_until = {_LOCK.format(failures=_FAILURES)},
    expires_at = {_LOCK.format(failures=_FAILURES)} + make_interval(secs => :seconds)
WHERE t.locked_until <= clock_timestamp()
RETURNING failures
""")
WAIT_SQL = sa.text("""
SELECT extract(epoch FROM locked_until - clock_timestamp()) AS seconds_left FROM login_throttles WHERE bucket = :bucket
""")
RESET_SQL = sa.text("DELETE FROM login_throttles WHERE bucket = :bucket")
SWEEP_LOGINS_SQL = sa.text("DELETE FROM login_throttles WHERE expires_at < clock_timestamp()")

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
    "desk_api.rating": ("feedback", "rate_limit_feedback"), "help_rating.rate": ("feedback", "rate_limit_feedback"),
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


def acknowledgement_allowed() -> bool:
    """Whether this request may cause one more acknowledgement: MAIL_ACK_PER_CLIENT_PER_HOUR per client address for
    anonymous callers (counted here), always for a signed-in agent or a script with a token."""
    if g.get("identity") is not None:
        return True
    runtime = current_app.extensions["supportrag"]
    with runtime.session() as session:
        count = count_hit(session, f"acknowledgements:{request.remote_addr}", 3600)
    return count.hits <= runtime.settings.mail_ack_per_client_per_hour


def login_bucket(username: str, client: str | None) -> str:
    """The throttle key of a username as typed (NFKC, trimmed, case-folded: "OTHER", " other" and "oThEr" are
    one) from one client address; hashed, so the table never holds what was typed."""
    name = unicodedata.normalize("NFKC", username).strip().casefold()
    return hashlib.sha256(f"{name}\0{client or ''}".encode("utf-8", "replace")).hexdigest()[:32]


def reserve_login_attempt(session: Session, bucket: str, lockout: tuple[int, int]) -> None:
    """Count this attempt as a failure before the password is checked (``clear_login_failures`` undoes it on
    success); 429 while the pair waits."""
    if random.random() < SWEEP_PROBABILITY:
        session.execute(SWEEP_LOGINS_SQL)
    limit, seconds = lockout
    if session.execute(ATTEMPT_SQL, {"bucket": bucket, "limit": limit, "seconds": seconds}).one_or_none():
        return
    wait = session.execute(WAIT_SQL, {"bucket": bucket}).scalar_one_or_none() or 1
    raise too_many("failed logins for this username from your address; it is locked", lockout,
                   max(1, math.ceil(wait)))


def clear_login_failures(session: Session, bucket: str) -> None:
    """A successful login forgets the pair's failures."""
    session.execute(RESET_SQL, {"bucket": bucket})
