"""The Drafts panel: how much agents change AI drafts, how fast they first respond, who solves tickets.

As help desks measure AI assistance: a sent reply started from a draft is "unchanged" (edit ratio 0),
"replaced" (edit ratio at least REPLACED_AT) or "edited" (in between).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import DRAFT_REPLACED_AT as REPLACED_AT


# One pass over the period's replies and one over its tickets; percentiles in SQL, not in Python.
DRAFTS_SQL = sa.text("""
WITH replies AS (
    SELECT m.edit_ratio FROM ticket_messages m
    WHERE m.kind = 'agent_reply' AND m.created_at >= now() - make_interval(days => :days)
),
responded AS (
    SELECT EXTRACT(EPOCH FROM t.first_response_at - t.opened_at) / 60.0 AS minutes FROM tickets t
    WHERE t.first_response_at >= now() - make_interval(days => :days) AND t.opened_at IS NOT NULL
      AND t.first_response_at >= t.opened_at
),
solved AS (
    SELECT t.solved_by,
           EXISTS (SELECT 1 FROM ticket_messages m WHERE m.ticket_id = t.id AND m.kind = 'agent_reply') AS replied
    FROM tickets t
    WHERE t.state = 'solved' AND t.created_at >= now() - make_interval(days => :days)
)
SELECT
    (SELECT count(*) FROM replies) AS replies,
    (SELECT count(*) FROM replies WHERE edit_ratio = 0) AS unchanged,
    (SELECT count(*) FROM replies WHERE edit_ratio > 0 AND edit_ratio < :replaced_at) AS edited,
    (SELECT count(*) FROM replies WHERE edit_ratio >= :replaced_at) AS replaced,
    (SELECT count(*) FROM replies WHERE edit_ratio IS NULL) AS without_draft,
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY edit_ratio) FROM replies) AS median_edit_ratio,
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY minutes) FROM responded) AS first_response_median,
    (SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY minutes) FROM responded) AS first_response_p90,
    (SELECT count(*) FROM responded) AS responded,
    (SELECT count(*) FROM solved WHERE solved_by = 'customer' AND NOT replied) AS solved_by_ai,
    (SELECT count(*) FROM solved WHERE solved_by = 'agent' OR replied) AS solved_by_agent
""")


@dataclass(frozen=True)
class DraftsReport:
    """The Drafts panel's figures for the last ``days`` days (minutes for response times)."""

    days: int
    replies: int
    unchanged: int
    edited: int
    replaced: int
    without_draft: int
    median_edit_ratio: float | None
    first_response_median: float | None
    first_response_p90: float | None
    responded: int
    solved_by_ai: int
    solved_by_agent: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def drafts_report(session: Session, *, days: int = 14) -> DraftsReport:
    """The figures, in one statement."""
    row = session.execute(DRAFTS_SQL, {"days": days, "replaced_at": REPLACED_AT}).mappings().one()
    floats = ("median_edit_ratio", "first_response_median", "first_response_p90")
    return DraftsReport(days=days, **{k: (float(v) if v is not None else None) if k in floats else v
                                      for k, v in row.items()})
