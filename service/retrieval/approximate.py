"""The opt-in approximate mode: HNSW on the half-precision vectors finds candidates, the exact formula ranks them.

For corpora past what a scan serves. ``supportrag db hnsw`` builds two HNSW indexes on ``search_vectors``
(migration 0016), sections' and cards', on ``embedding_half`` at the active model's width (partial: that model's
rows only, as a model's vectors all share one width). A search then reads the ``candidates`` nearest sections
and cards by cosine with ``hnsw.iterative_scan`` (so the filter on the model never starves the LIMIT), and ranks
their articles by the exact formula in full precision. An article far down the cosine order that recency × importance would lift into
the top-k is missed: results say ``"exact": false``, and ``bench/search.py --approximate`` measures recall@10
against the exact scan. The default stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.orm import Session

from service.db.engine import READ_REPLICA

# Each index's rows: a section's vector, or an article's own (its card).
UNITS = {"sections": "section_id IS NOT NULL", "cards": "section_id IS NULL"}
ITERATIVE_SCAN = "relaxed_order"

MODEL_WIDTH_SQL = sa.text(
    "SELECT vector_dims(embedding_half) FROM search_vectors WHERE embedding_model = :model LIMIT 1")

SETTINGS_SQL = sa.text("""
SELECT set_config('hnsw.iterative_scan', :iterative_scan, true), set_config('hnsw.ef_search', :ef_search, true)
""").execution_options(**{READ_REPLICA: True})


@dataclass(frozen=True)
class ApproximateIndex:
    """What ``build_approximate_index`` built."""

    model: str
    width: int
    names: list[str]


def index_name(units: str) -> str:
    return f"search_vectors_{units}_hnsw"


def build_approximate_index(session: Session, model: str, *, m: int = 16,
                            ef_construction: int = 64) -> ApproximateIndex | None:
    """(Re)build the HNSW indexes for ``model``'s vectors (None: nothing embedded yet); the caller commits."""
    width = session.execute(MODEL_WIDTH_SQL, {"model": model}).scalar()
    if width is None:
        return None
    raw = session.connection().connection.driver_connection
    for units, where in UNITS.items():
        raw.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index_name(units))))
        raw.execute(sql.SQL(
            "CREATE INDEX {name} ON search_vectors USING hnsw ((embedding_half::halfvec({width})) halfvec_cosine_ops) "
            "WITH (m = {m}, ef_construction = {ef}) WHERE embedding_model = {model} AND {where}"
        ).format(name=sql.Identifier(index_name(units)), width=sql.Literal(int(width)), m=sql.Literal(int(m)),
                 ef=sql.Literal(int(ef_construction)), model=sql.Literal(model), where=sql.SQL(where)))
    return ApproximateIndex(model=model, width=int(width), names=[index_name(units) for units in UNITS])


@lru_cache(maxsize=None)
def candidates_statement(width: int) -> sa.TextClause:
    """The articles of the ``:candidates`` nearest sections and cards (in the order HNSW yields them)."""
    query = f"CAST(l2_normalize(CAST(:query_vector AS vector)) AS halfvec({int(width)}))"
    branches = [f"""(SELECT v.article_id AS id FROM search_vectors v WHERE v.embedding_model = :model AND v.{where}
     ORDER BY v.embedding_half::halfvec({int(width)}) <=> {query} LIMIT :candidates)"""
                for where in UNITS.values()]
    return sa.text("SELECT DISTINCT id FROM (\n" + "\nUNION ALL\n".join(branches) + "\n) near"
                   ).execution_options(**{READ_REPLICA: True})


def approximate_candidates(session: Session, query_vector: np.ndarray, *, model: str, candidates: int,
                           ef_search: int) -> list[int]:
    """Article ids whose sections or card are among the ``candidates`` nearest to the query (approximately)."""
    session.execute(SETTINGS_SQL, {"iterative_scan": ITERATIVE_SCAN, "ef_search": str(ef_search)})
    statement = candidates_statement(len(query_vector))
    return list(session.execute(statement, {"query_vector": np.asarray(query_vector, dtype=np.float32),
                                            "model": model, "candidates": candidates}).scalars())
