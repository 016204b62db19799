"""Similar solved tickets: the nearest ticket questions by cosine, exact on a small table, HNSW past it.

``ticket_vectors`` (migration 0018) holds one unit vector per ticket question at the model's width (halfvec), with
``solved_at`` copied from the ticket. An HNSW index per width (``ticket_vectors_hnsw_<width>``: an expression index
on ``embedding::halfvec(<width>)``, cosine, partial on solved rows of that width) serves large tables; migration
0026 creates MiniLM's (384), ``supportrag db hnsw`` any other model's (``build_ticket_index``). pgvector maintains
it on every insert and on ``solved_at`` changes.

Below ``EXACT_BELOW`` solved vectors (as the planner last counted them in the index) the exact scan is as quick as
the index and proven (bench/similar_tickets.py measured where the lines cross); past it the index is read with
``hnsw.iterative_scan`` (so filtering on the model and the excluded ticket never starves the LIMIT) and
``hnsw.ef_search = EF_SEARCH`` (recall@10 0.966 against the exact scan at a million rows, same bench).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.orm import Session

from service.db.engine import READ_REPLICA

# Solved vectors below which the exact scan answers: at 5k–10k it is as quick as the index (4.5 vs 6.8 ms p50 at
# 5k, 63 vs 57 ms at 10k on a loaded machine), from 20k the index wins (100 vs 70 ms, recall@10 0.99) and the gap
# grows linearly (bench/similar_tickets.py, docs/performance-speed.md).
EXACT_BELOW = 10_000
# Candidates the HNSW walk keeps: recall@10 at 1M rows was 0.86 at 100, 0.918 at 200, 0.942 at 400 and 0.966 at
# 800 (p50 30 ms, p95 64 ms under load), so 800 (pgvector allows up to 1000).
EF_SEARCH = 800
ITERATIVE_SCAN = "relaxed_order"  # re-sorted below: a relaxed walk may yield a neighbour slightly out of order

SETTINGS_SQL = sa.text("""
SELECT set_config('hnsw.iterative_scan', :iterative_scan, true), set_config('hnsw.ef_search', :ef_search, true)
""").execution_options(**{READ_REPLICA: True})

# The planner's count of the width's indexed (solved) vectors: free to read, refreshed by autovacuum/ANALYZE.
INDEXED_ROWS_SQL = sa.text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:name)"
                           ).execution_options(**{READ_REPLICA: True})


@dataclass(frozen=True)
class TicketNeighbour:
    """A solved ticket whose question is near the query; ``similarity`` is the cosine (1 = same direction)."""

    ticket_id: int
    similarity: float


def index_name(width: int) -> str:
    """The HNSW index over solved ticket vectors of this width."""
    return f"ticket_vectors_hnsw_{int(width)}"


def index_definition(width: int, *, m: int = 16, ef_construction: int = 64) -> sql.Composed:
    """``CREATE INDEX IF NOT EXISTS`` for the width's HNSW index (also what migration 0026 runs for 384)."""
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON ticket_vectors USING hnsw "
        "((embedding::halfvec({width})) halfvec_cosine_ops) WITH (m = {m}, ef_construction = {ef}) "
        "WHERE solved_at IS NOT NULL AND vector_dims(embedding) = {width}"
    ).format(name=sql.Identifier(index_name(width)), width=sql.Literal(int(width)), m=sql.Literal(int(m)),
             ef=sql.Literal(int(ef_construction)))


def build_ticket_index(session: Session, width: int, *, m: int = 16, ef_construction: int = 64) -> str:
    """(Re)build the HNSW index for ``width``-d ticket vectors; returns its name. The caller commits."""
    raw = session.connection().connection.driver_connection
    raw.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index_name(width))))
    raw.execute(index_definition(width, m=m, ef_construction=ef_construction))
    return index_name(width)


@lru_cache(maxsize=None)
def exact_statement(width: int) -> sa.TextClause:
    """Every solved vector of the model, compared with the query (no index matches this ORDER BY)."""
    return sa.text(f"""
SELECT ticket_id, 1 - (embedding <=> CAST(:query AS halfvec({int(width)}))) AS similarity
FROM ticket_vectors
WHERE solved_at IS NOT NULL AND embedding_model = :model AND ticket_id <> :exclude
ORDER BY embedding <=> CAST(:query AS halfvec({int(width)})), ticket_id
LIMIT :limit""").execution_options(**{READ_REPLICA: True})


@lru_cache(maxsize=None)
def hnsw_statement(width: int) -> sa.TextClause:
    """The nearest solved vectors through ``ticket_vectors_hnsw_<width>`` (its expression and predicate)."""
    expression = f"embedding::halfvec({int(width)})"
    query = f"CAST(:query AS halfvec({int(width)}))"
    return sa.text(f"""
WITH near AS MATERIALIZED (
    SELECT ticket_id, {expression} <=> {query} AS distance
    FROM ticket_vectors
    WHERE solved_at IS NOT NULL AND vector_dims(embedding) = {int(width)}
      AND embedding_model = :model AND ticket_id <> :exclude
    ORDER BY {expression} <=> {query}
    LIMIT :limit
)
SELECT ticket_id, 1 - distance AS similarity FROM near ORDER BY distance, ticket_id""").execution_options(
        **{READ_REPLICA: True})


def indexed_rows(session: Session, width: int) -> float | None:
    """The planner's row count of the width's HNSW index; None if there is no such index."""
    rows = session.execute(INDEXED_ROWS_SQL, {"name": index_name(width)}).scalar()
    return None if rows is None else float(rows)


def find_similar_tickets(session: Session, vector: np.ndarray, *, model: str, limit: int,
                         exclude_ticket_id: int | None = None, exact_below: int = EXACT_BELOW,
                         ef_search: int = EF_SEARCH) -> list[TicketNeighbour]:
    """The ``limit`` solved tickets whose question vectors (of ``model``) are nearest to ``vector``, best first."""
    query = np.asarray(vector, dtype=np.float32).ravel()
    width = len(query)
    norm = float(np.linalg.norm(query))
    if limit < 1 or width == 0 or norm == 0:
        return []
    params = {"query": query / norm, "model": model, "limit": int(limit),
              "exclude": -1 if exclude_ticket_id is None else int(exclude_ticket_id)}
    indexed = indexed_rows(session, width)
    if indexed is None or (exact_below > 0 and indexed < exact_below):  # no index, or a table the scan serves
        rows = session.execute(exact_statement(width), params)
    else:
        session.execute(SETTINGS_SQL, {"iterative_scan": ITERATIVE_SCAN, "ef_search": str(int(ef_search))})
        rows = session.execute(hnsw_statement(width), params)
    return [TicketNeighbour(ticket_id=row.ticket_id, similarity=float(row.similarity)) for row in rows]
