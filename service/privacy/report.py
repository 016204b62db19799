"""What erasure and retention removed lately, for the dashboard (from the privacy log, which holds no address)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

RECENT_SQL = sa.text("""
SELECT kind, count(*) AS runs, coalesce(sum((SELECT sum(value::bigint) FROM jsonb_each_text(counts))), 0) AS rows
FROM privacy_events WHERE created_at >= now() - make_interval(days => :days)
GROUP BY kind
""")


def privacy_counts(session: Session, *, days: int = 30) -> dict[str, dict[str, int]]:
    """Per kind (erase, retention_raw_mail, retention_tickets, trash_purge): runs and rows over ``days``."""
    return {row.kind: {"runs": row.runs, "rows": int(row.rows)}
            for row in session.execute(RECENT_SQL, {"days": days})}
