"""K-means clusters of one model's vectors: what the exact walk (service.retrieval.walk) bounds cosines with.

``train_clusters`` (``supportrag db cluster``) fits spherical k-means on a sample of the model's vectors
(articles' own and sections'), assigns every vector to its nearest centroid, stores each cluster's radius (the
largest angle to a member) and drops the previous clusters of that model. ``assign_clusters`` places new
vectors as they are written (service.knowledge.indexing). The database keeps the radius honest whatever the
writer (migration 0010's trigger widens it when a vector lands outside), so a stale or missing assignment costs
speed, never a result.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import VECTOR_DIMENSIONS

log = logging.getLogger(__name__)

# (table, id column) of every stored vector.
VECTOR_TABLES = (("knowledge_base", "id"), ("knowledge_sections", "id"))
RADIUS_MARGIN = 0.001  # radians, as the trigger's: acos near 0 amplifies float error
CHUNK = 4096


def default_cluster_count(rows: int) -> int:
    """About √rows / 2 clusters (387 for 600k vectors), at least 1 and at most 4,096."""
    return max(1, min(4096, round(math.sqrt(rows) / 2)))


class CentroidCache:
    """Centroids never change once written (re-training makes new rows): kept per process, keyed by id and
    creation time (another database may reuse an id, not with the same instant)."""

    SQL = sa.text("SELECT id, created_at, centroid FROM vector_clusters WHERE id = ANY(CAST(:ids AS int[]))")

    def __init__(self, capacity: int = 65_536) -> None:
        self._vectors: dict[tuple[int, datetime], np.ndarray] = {}
        self._lock = threading.Lock()
        self._capacity = capacity
        self._last: tuple[list, np.ndarray] | None = None

    def get(self, session: Session, keys: list[tuple[int, datetime]],
            statement: sa.TextClause | None = None) -> np.ndarray:
        """Unit centroids of ``keys`` (id, created_at) as rows of a (len(keys), 1536) float64 matrix."""
        last = self._last
        if last is not None and last[0] == keys:
            return last[1]  # the same clusters as the last search: no re-stacking (1–2 ms at 400 clusters)
        missing = [cluster_id for cluster_id, created in keys if (cluster_id, created) not in self._vectors]
        if missing:
            rows = session.execute(statement if statement is not None else self.SQL, {"ids": missing}).all()
            with self._lock:
                if len(self._vectors) + len(rows) > self._capacity:
                    self._vectors.clear()
                for cluster_id, created, centroid in rows:
                    vector = _array(centroid).astype(np.float64)
                    self._vectors[(cluster_id, created)] = vector / np.linalg.norm(vector)
        if not keys:
            return np.zeros((0, VECTOR_DIMENSIONS))
        matrix = np.stack([self._vectors[key] for key in keys])
        self._last = (list(keys), matrix)
        return matrix


CENTROIDS = CentroidCache()
MODEL_CLUSTERS_SQL = sa.text("SELECT id, created_at FROM vector_clusters WHERE model = :model ORDER BY id")


def assign_clusters(session: Session, model: str, vectors: list[np.ndarray | None]) -> list[int | None]:
    """The nearest cluster of ``model`` for each vector (None: no vector, or no clusters yet)."""
    present = [i for i, v in enumerate(vectors) if v is not None]
    result: list[int | None] = [None] * len(vectors)
    if not present:
        return result
    keys = [tuple(row) for row in session.execute(MODEL_CLUSTERS_SQL, {"model": model})]
    if not keys:
        return result
    matrix = np.stack([np.asarray(vectors[i], dtype=np.float64) for i in present])
    nearest = np.argmax(matrix @ CENTROIDS.get(session, keys).T, axis=1)
    for position, index in zip(present, nearest):
        result[position] = keys[int(index)][0]
    return result


@dataclass(frozen=True)
class ClusterReport:
    """What ``train_clusters`` did."""

    model: str
    clusters: int
    vectors: int
    sample: int
    seconds: float
    median_radius_degrees: float | None
    max_radius_degrees: float | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def spherical_kmeans(vectors: np.ndarray, k: int, *, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Unit centroids of ``vectors`` (unit rows): assign by largest cosine, move to the normalised mean."""
    k = min(k, len(vectors))
    centroids = vectors[rng.choice(len(vectors), k, replace=False)].copy()
    for _ in range(iterations):
        labels = _nearest(vectors, centroids)[0]
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=k)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        filled = counts > 0
        sums = np.add.reduceat(vectors[order], starts[filled], axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids[filled] = sums / np.where(norms > 0, norms, 1.0)
        empty = np.flatnonzero(~filled)
        if len(empty):  # an empty cluster restarts at a random vector
            centroids[empty] = vectors[rng.choice(len(vectors), len(empty), replace=False)]
    return centroids


def _nearest(vectors: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest centroid and the cosine to it, for each unit row."""
    labels = np.empty(len(vectors), dtype=np.int64)
    cosines = np.empty(len(vectors), dtype=np.float64)
    for start in range(0, len(vectors), CHUNK):
        similarities = vectors[start:start + CHUNK] @ centroids.T
        labels[start:start + CHUNK] = np.argmax(similarities, axis=1)
        cosines[start:start + CHUNK] = similarities[np.arange(len(similarities)), labels[start:start + CHUNK]]
    return labels, cosines


def _array(embedding) -> np.ndarray:
    """A stored vector as numpy (pgvector's binary loader gives a ``Vector``)."""
    return np.asarray(embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding, dtype=np.float32)


def _unit_rows(embeddings: list, dimensions: int) -> np.ndarray:
    """Stored vectors as unit rows, cut to ``dimensions`` (the rest is the zero padding; the norm is the full
    vector's, so the cosines are exact even if it were not)."""
    matrix = np.stack([_array(e) for e in embeddings])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix[:, :dimensions] / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _sample(raw, model: str, size: int, total: int) -> list:
    fraction = min(1.0, 1.2 * size / max(total, 1))
    vectors: list = []
    for table, _ in VECTOR_TABLES:
        vectors += [row[0] for row in raw.execute(
            f"SELECT embedding FROM {table} WHERE embedding_model = %s AND embedding IS NOT NULL "
            "AND random() < %s", (model, fraction), binary=True)]
    return vectors[:size]


def train_clusters(session: Session, model: str, *, clusters: int | None = None, sample: int = 50_000,
                   iterations: int = 12, seed: int = 0) -> ClusterReport:
    """Fit, assign and store ``model``'s clusters in the session's transaction (the caller commits)."""
    started = time.perf_counter()
    raw = session.connection().connection.driver_connection
    total = sum(raw.execute(f"SELECT count(*) FROM {table} WHERE embedding_model = %s AND embedding IS NOT NULL",
                            (model,)).fetchone()[0] for table, _ in VECTOR_TABLES)
    old = [row[0] for row in raw.execute("SELECT id FROM vector_clusters WHERE model = %s", (model,))]
    if total == 0:
        raw.execute("DELETE FROM vector_clusters WHERE model = %s", (model,))
        return ClusterReport(model, 0, 0, 0, time.perf_counter() - started, None, None)
    embeddings = _sample(raw, model, sample, total)
    stacked = np.stack([_array(e) for e in embeddings])
    used = np.flatnonzero(np.any(stacked != 0, axis=0))
    dimensions = int(used[-1]) + 1 if len(used) else VECTOR_DIMENSIONS
    points = _unit_rows(embeddings, dimensions)
    k = clusters or default_cluster_count(total)
    centroids = spherical_kmeans(points, k, iterations=iterations, rng=np.random.default_rng(seed))
    radii, members, assignment = _assign_all(raw, model, centroids, dimensions)
    ids = _store(raw, model, centroids, radii, members)
    raw.execute("CREATE TEMP TABLE cluster_assignment (kind smallint, id bigint, cluster int) ON COMMIT DROP")
    with raw.cursor().copy("COPY cluster_assignment FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int2", "int8", "int4"])
        for kind, row_id, label in assignment:
            copy.write_row((kind, row_id, ids[label]))
    for kind, (table, id_column) in enumerate(VECTOR_TABLES):
        raw.execute(f"UPDATE {table} t SET cluster_id = a.cluster FROM cluster_assignment a "
                    f"WHERE a.kind = %s AND t.{id_column} = a.id", (kind,))
    if old:
        raw.execute("DELETE FROM vector_clusters WHERE id = ANY(%s)", (old,))
    raw.execute("DROP TABLE cluster_assignment")
    degrees = np.degrees(radii[members > 0]) if np.any(members > 0) else np.array([])
    return ClusterReport(model, int(np.count_nonzero(members)), len(assignment), len(points),
                         round(time.perf_counter() - started, 2),
                         round(float(np.median(degrees)), 2) if len(degrees) else None,
                         round(float(degrees.max()), 2) if len(degrees) else None)


def vacuum_vector_tables(engine: sa.Engine) -> None:
    """VACUUM ANALYZE after a training: it rewrote every vector row, and until the old versions are vacuumed
    an index scan still visits them (measured: a walk round of 0.5 ms took 50 ms on 50k dead rows)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for table, _ in VECTOR_TABLES:
            connection.execute(sa.text(f"VACUUM (ANALYZE) {table}"))


def rewrite_vector_tables(engine: sa.Engine) -> None:
    """CLUSTER both tables on the walk's btree: compact again after a training rewrote every row, and each
    cluster's rows on adjacent pages. Holds an exclusive lock on each table while it runs (searches wait)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for table, _ in VECTOR_TABLES:
            connection.execute(sa.text(f"CLUSTER {table} USING {table}_cluster_boost"))
            connection.execute(sa.text(f"ANALYZE {table}"))


def _assign_all(raw, model: str, centroids: np.ndarray, dimensions: int):
    """Every vector's nearest centroid, streamed in chunks; each cluster's radius and member count."""
    radii = np.zeros(len(centroids))
    members = np.zeros(len(centroids), dtype=np.int64)
    assignment: list[tuple[int, int, int]] = []
    for kind, (table, id_column) in enumerate(VECTOR_TABLES):
        with raw.cursor(name=f"cluster_{table}", binary=True) as cursor:
            cursor.itersize = CHUNK
            cursor.execute(f"SELECT {id_column}, embedding FROM {table} "
                           "WHERE embedding_model = %s AND embedding IS NOT NULL", (model,))
            while rows := cursor.fetchmany(CHUNK):
                labels, cosines = _nearest(_unit_rows([r[1] for r in rows], dimensions), centroids)
                angles = np.arccos(np.clip(cosines, -1.0, 1.0)) + RADIUS_MARGIN
                np.maximum.at(radii, labels, angles)
                members += np.bincount(labels, minlength=len(centroids))
                assignment += [(kind, row[0], int(label)) for row, label in zip(rows, labels)]
    return radii, members, assignment


def _store(raw, model: str, centroids: np.ndarray, radii: np.ndarray, members: np.ndarray) -> list[int]:
    """Insert the clusters that got members; returns the new id of every centroid (None for empty ones)."""
    ids: list = [None] * len(centroids)
    for index in np.flatnonzero(members > 0):
        padded = np.zeros(VECTOR_DIMENSIONS, dtype=np.float32)
        padded[:centroids.shape[1]] = centroids[index]
        ids[index] = raw.execute(
            "INSERT INTO vector_clusters (model, centroid, radius, members) VALUES (%s, %s, %s, %s) RETURNING id",
            (model, padded, float(radii[index]), int(members[index]))).fetchone()[0]
    return ids
