"""The index walk: which articles can be in the exact top-k, read from the HNSW indexes in descending cosine.

Sections and cards are walked through HNSW indexes on ``subvector(embedding, 1, 384)::halfvec(384)`` (migration
0009): the real dimensions of the local model (MiniLM), the rest of the 1536 being zero padding, in half
precision. The walk reads both streams through cursors (``hnsw.iterative_scan = relaxed_order``), a batch at a
time from the stream whose frontier is higher, keeps each eligible article's best cosine, and stops once the
k-th best *lower bound* of a walked article's score beats the best score an unwalked article can reach
(``ranking.walk_can_stop``). Past ``budget`` rows of a stream the caller runs the exact scan instead. The walked
articles that can still reach the top-k (``ranking.walk_survivors``) are re-scored exactly, in full precision,
by the same statement as the exact scan (``sql.build_statement(..., candidates=True)``).

What makes the result equal to brute force: (1) the walked cosine of a half-precision vector is within
``HALF_TOLERANCE`` of the full-precision one; (2) the index has returned every row closer than the least cosine
read so far (the frontier). (2) is HNSW's recall, which no graph index guarantees: exact on the small graphs of
the tests, measured (recall@3/@10 against the exact scan) by bench/search.py on large ones.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.engine import READ_REPLICA
from service.retrieval.ranking import (
    RankingWeights,
    WalkedArticle,
    walk_can_stop,
    walk_score_bound,
    walk_survivors,
)

INDEX_DIMENSIONS = 384  # migration 0009's index expression; a model with more dimensions is never walked
# |cos(half(a), half(b)) − cos(a, b)| ≤ ~3 × 2⁻¹⁰ for unit vectors (each component rounded to 11 bits); doubled.
HALF_TOLERANCE = 0.006
WALK_EF_SEARCH = 40
# relaxed_order: strict_order drops a row found after a farther one was returned (recall@10 0.953 at 100k × 5,
# 64 topics), relaxed_order returns it late (0.995): the least cosine read is then not a true bound either.
ITERATIVE_SCAN = "relaxed_order"
FIRST_WALK_ROWS = 32
MAX_BATCH = 256  # larger batches overshoot the stopping point (measured: bench/search.py)
EXHAUSTED = -2.0  # below any cosine: nothing left unwalked in that stream

_RECENCY = """LEAST(1.0, GREATEST(0.0,
               1.0 - EXTRACT(EPOCH FROM (:now - kb.created_at))::double precision / 86400.0 / :window_days))"""
_HALF_QUERY = f"subvector(CAST(:query_vector AS vector), 1, {INDEX_DIMENSIONS})::halfvec({INDEX_DIMENSIONS})"


def _on_replica(statement: str) -> sa.TextClause:
    """A walk statement: every one of them runs where the search runs (the read replica, if any)."""
    return sa.text(statement).execution_options(**{READ_REPLICA: True})


def _half(column: str) -> str:
    """The indexed expression, exactly as migration 0009 declares it (the planner matches it textually)."""
    return f"(subvector({column}, 1, {INDEX_DIMENSIONS})::halfvec({INDEX_DIMENSIONS}))"


def _stream_sql(table: str, id_column: str, cursor: str) -> str:
    """A cursor over one table's vectors of ``:model`` in descending (half-precision) cosine, at most the budget."""
    return f"""DECLARE {cursor} NO SCROLL CURSOR FOR
SELECT {id_column} AS article_id, 1.0 - ({_half('embedding')} <=> {_HALF_QUERY}) AS similarity
FROM {table}
WHERE embedding_model = :model
ORDER BY {_half('embedding')} <=> {_HALF_QUERY}
LIMIT :budget"""


STREAMS = {"section": ("knowledge_sections", "article_id"), "card": ("knowledge_base", "id")}
# The boost of the walked articles that search may return (eligible), read once per batch of new ids.
BOOSTS_SQL = sa.text(f"""
SELECT kb.id, kb.importance * {_RECENCY} AS boost
FROM knowledge_base kb
WHERE kb.id = ANY(CAST(:ids AS bigint[])) AND kb.embedding IS NOT NULL AND kb.embedding_model = :model
  AND (CAST(:source_prefix AS text) IS NULL OR starts_with(kb.source_path, :source_prefix))
""").bindparams(sa.bindparam("now", type_=sa.DateTime(timezone=True)),
                sa.bindparam("window_days", type_=sa.Double)).execution_options(**{READ_REPLICA: True})

# Served by the btree of migration 0009: one index probe, not a scan. An upper bound of any eligible boost.
MAX_IMPORTANCE_SQL = _on_replica("SELECT coalesce(max(importance), 0.0) FROM knowledge_base")
# The planner's row estimate: a small table is scanned exactly, never walked.
SECTION_ESTIMATE_SQL = _on_replica(
    "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'knowledge_sections'::regclass")
COUNT_SECTIONS_SQL = _on_replica(
    "SELECT count(*) FROM knowledge_sections WHERE embedding_model = :model AND embedding IS NOT NULL")
COUNT_CARDS_SQL = _on_replica(
    "SELECT count(*) FROM knowledge_base WHERE embedding_model = :model AND embedding IS NOT NULL")
WALK_SETTINGS_SQL = _on_replica("""
SELECT set_config('hnsw.iterative_scan', :iterative_scan, true), set_config('hnsw.ef_search', :ef_search, true),
       set_config('hnsw.max_scan_tuples', :max_scan_tuples, true)
""")


@dataclass(frozen=True)
class WalkResult:
    """The articles that can be in the top-k, and the cosine above which every article was walked."""

    candidate_ids: list[int]
    frontier_similarity: float
    walked_rows: int


def can_walk(query_vector: np.ndarray) -> bool:
    """Only a vector whose dimensions past the indexed ones are zero (a model of ≤ 384) walks exactly."""
    vector = np.asarray(query_vector, dtype=np.float32)
    return vector.shape[0] >= INDEX_DIMENSIONS and not np.any(vector[INDEX_DIMENSIONS:])


def walk_candidates(session: Session, query_vector: np.ndarray, *, model: str, limit: int,
                    weights: RankingWeights, now: datetime, budget: int, first_rows: int = FIRST_WALK_ROWS,
                    source_prefix: str | None = None) -> WalkResult | None:
    """Candidates holding the exact top-``limit`` if the index returned rows in cosine order (HNSW does not
    promise it: see the module docstring), or None (walk past ``budget``: scan instead)."""
    max_importance = float(session.execute(MAX_IMPORTANCE_SQL).scalar_one())
    session.execute(WALK_SETTINGS_SQL, {"ef_search": str(WALK_EF_SEARCH), "max_scan_tuples": str(4 * budget),
                                        "iterative_scan": ITERATIVE_SCAN})
    params = {"query_vector": np.asarray(query_vector, dtype=np.float32), "model": model, "budget": budget}
    cursors = {kind: f"walk_{kind}_{uuid.uuid4().hex[:12]}" for kind in STREAMS}
    for kind, (table, id_column) in STREAMS.items():
        session.execute(_on_replica(_stream_sql(table, id_column, cursors[kind])), params)
    walk = _Walk(session, model=model, now=now, weights=weights, source_prefix=source_prefix)
    result = walk.run(cursors, limit=limit, max_importance=max_importance, budget=budget, batch=first_rows)
    for cursor in cursors.values():
        session.execute(_on_replica(f"CLOSE {cursor}"))
    return result


class _Walk:
    """The state of one walk: each stream's frontier and rows read, each walked article's best cosine."""

    def __init__(self, session: Session, *, model: str, now: datetime, weights: RankingWeights,
                 source_prefix: str | None) -> None:
        self.session, self.model, self.weights = session, model, weights
        self.lookup = {"model": model, "now": now, "window_days": weights.recency_window_days,
                       "source_prefix": source_prefix}
        self.frontier = {kind: 1.0 + HALF_TOLERANCE for kind in STREAMS}
        self.read = {kind: 0 for kind in STREAMS}
        self.similarity: dict[int, float] = {}
        self.boost: dict[int, float | None] = {}  # None: not eligible (another model, filtered out)

    def run(self, cursors: dict[str, str], *, limit: int, max_importance: float, budget: int,
            batch: int) -> WalkResult | None:
        """Read the stream with the higher frontier a batch at a time until the stopping rule holds."""
        while True:
            kind = max(self.frontier, key=lambda name: self.frontier[name])
            if self.frontier[kind] == EXHAUSTED:  # every vector walked: every article is a candidate
                return self._result(limit)
            if not self._fetch(kind, cursors[kind], batch, budget):
                return None
            walked = self._walked()
            lower = [(a.similarity - HALF_TOLERANCE) * self.weights.similarity_weight
                     + a.boost * self.weights.recency_weight for a in walked]
            bound = walk_score_bound(max(self.frontier.values()), max_importance=max_importance,
                                     weights=self.weights, tolerance=HALF_TOLERANCE)
            if walk_can_stop(lower, k=limit, unseen_bound=bound):
                return self._result(limit)
            batch = min(2 * batch, MAX_BATCH)

    def _fetch(self, kind: str, cursor: str, batch: int, budget: int) -> bool:
        """One batch of a stream; False when the walk cannot prove anything (budget, or an index gap)."""
        rows = self.session.execute(_on_replica(f"FETCH {int(batch)} FROM {cursor}")).all()
        self.read[kind] += len(rows)
        new_ids = []
        for article_id, similarity in rows:
            if article_id not in self.similarity:
                new_ids.append(article_id)
                self.similarity[article_id] = float(similarity)
            else:
                self.similarity[article_id] = max(self.similarity[article_id], float(similarity))
        if new_ids:
            boosts = dict(self.session.execute(BOOSTS_SQL, {**self.lookup, "ids": new_ids}).all())
            self.boost.update({i: _float(boosts.get(i)) for i in new_ids})
        if len(rows) == batch:
            # The least cosine read so far: with relaxed order a later row may be closer than the last one.
            self.frontier[kind] = min(self.frontier[kind], *(float(row[1]) for row in rows))
            return True
        if self.read[kind] >= budget:
            return False
        # Fewer than asked: the whole stream, unless the scan stopped early (max_scan_tuples, graph gaps).
        count_sql = COUNT_SECTIONS_SQL if kind == "section" else COUNT_CARDS_SQL
        if self.session.execute(count_sql, {"model": self.model}).scalar_one() != self.read[kind]:
            return False
        self.frontier[kind] = EXHAUSTED
        return True

    def _walked(self) -> list[WalkedArticle]:
        return [WalkedArticle(id=i, similarity=s, boost=self.boost[i])
                for i, s in self.similarity.items() if self.boost[i] is not None]

    def _result(self, limit: int) -> WalkResult:
        frontier = max(self.frontier.values())
        ids = walk_survivors(self._walked(), k=limit, frontier_similarity=frontier, weights=self.weights,
                             tolerance=HALF_TOLERANCE)
        return WalkResult(candidate_ids=ids, frontier_similarity=frontier, walked_rows=sum(self.read.values()))


def _float(value) -> float | None:
    return None if value is None else float(value)


def section_estimate(session: Session) -> int:
    """How many sections the planner thinks there are (0 before the first ANALYZE)."""
    return int(session.execute(SECTION_ESTIMATE_SQL).scalar_one())
