"""Planner statistics after a bulk write: ANALYZE the tables a write grew enough to mislead the planner.

Autovacuum analyzes a table once ``50 + 10 %`` of its rows changed, but only on its next round (a minute or more),
and a table never analyzed is planned from its page count: after importing 16,000 articles into an empty knowledge
base the planner expected 615 rows where there were 16,005, and vector search ran 84 ms p50 instead of 57 ms
(issue 37). ``refresh_statistics`` applies the same threshold at once, inside the writer's transaction: ANALYZE
counts the transaction's own new rows, and it takes no lock that blocks readers or writers.
"""

from __future__ import annotations

from typing import Mapping

import sqlalchemy as sa
from sqlalchemy.orm import Session

ANALYZE_BASE_ROWS = 50  # autovacuum_analyze_threshold's default
ANALYZE_SCALE = 0.1  # autovacuum_analyze_scale_factor's default

# reltuples is -1 for a table never analyzed (nor vacuumed): no statistics at all.
_PLANNED_ROWS = sa.text("""
SELECT c.relname AS name, c.reltuples AS planned
FROM pg_class AS c
WHERE c.oid = ANY (SELECT to_regclass(name) FROM unnest(CAST(:names AS text[])) AS name)
""")


def needs_analyze(written: int, planned_rows: float) -> bool:
    """Whether ``written`` new rows move a table the planner believes holds ``planned_rows`` (-1: never analyzed)."""
    return written > ANALYZE_BASE_ROWS + ANALYZE_SCALE * max(planned_rows, 0.0)


def refresh_statistics(session: Session, written: Mapping[str, int]) -> list[str]:
    """ANALYZE each table whose ``written`` row count passes autovacuum's threshold; returns the tables analyzed."""
    candidates = {name: rows for name, rows in written.items() if rows > ANALYZE_BASE_ROWS}
    if not candidates:
        return []
    planned = {row.name: row.planned for row in session.execute(_PLANNED_ROWS, {"names": list(candidates)})}
    analyzed = [name for name, rows in candidates.items() if name in planned and needs_analyze(rows, planned[name])]
    for name in analyzed:
        # A known table name (the writer's own tables), never user input: quoted as an identifier all the same.
        session.execute(sa.text(f"ANALYZE {session.bind.dialect.identifier_preparer.quote(name)}"))
    return analyzed
