"""What a running process needs: settings, a pooled engine, the embedder. Built once."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from contextlib import contextmanager
from functools import cached_property
from typing import Any, Iterator, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import RankingWeights, RetrievalSettings, Settings
from service.db.engine import (
    create_engine,
    make_session_factory,
    normalise_database_url,
    resolve_database_url,
    session_scope,
)
from service.db.migrate import upgrade_database
from service.knowledge.seeding import is_seeded, seed_knowledge_base
from service.providers.embeddings import Embedder, make_embedder
from service.providers.llm import ChatModel, make_chat_model

log = logging.getLogger(__name__)


QUERY_CACHE_MAX_CHARS = 1000  # a query, not a document: longer texts are never cached


class CachedEmbedder:
    """An embedder that remembers the vectors of the last ``size`` single texts it embedded (search queries:
    repeated ticket subjects are common); batches (documents) go straight to the provider."""

    def __init__(self, inner: Embedder, size: int) -> None:
        self.inner, self.size = inner, size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __getattr__(self, name: str) -> Any:
        # model_name, dimensions, input_window_tokens, count_tokens: the provider's own.
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The provider's vectors; a single short text is served from (and kept in) the cache."""
        if len(texts) != 1 or len(texts[0]) > QUERY_CACHE_MAX_CHARS:
            return self.inner.embed(texts)
        key = texts[0]
        with self._lock:
            if key in self._vectors:
                self._vectors.move_to_end(key)
                self.hits += 1
                return self._vectors[key].copy()
            self.misses += 1
        vectors = self.inner.embed(texts)
        with self._lock:
            self._vectors[key] = np.array(vectors, copy=True)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vectors


class Runtime:
    """Settings + engine + lazily loaded embedder, shared by the app, CLI and Python API.

    With a ``read_engine`` (DATABASE_READ_URL), sessions send the statements marked for the replica (search:
    service.retrieval.sql) there and everything else to ``engine``.
    """

    def __init__(self, settings: Settings, engine: sa.Engine, embedder: Embedder | None = None,
                 read_engine: sa.Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine
        self.read_engine = read_engine
        self.sessions = make_session_factory(engine, read_engine=read_engine)
        self._embedder = embedder
        self._embedder_lock = threading.Lock()

    @classmethod
    def start(cls, settings: Settings | None = None, *, migrate: bool = True,
              seed: bool | None = None, embedder: Embedder | None = None) -> "Runtime":
        """Connect (starting the embedded server if needed), migrate, and seed on first run."""
        settings = settings or Settings.from_env()
        pool_size = settings.database_pool_size
        read_engine = (create_engine(normalise_database_url(settings.database_read_url), pool_size=pool_size)
                       if settings.database_read_url else None)
        runtime = cls(settings, create_engine(resolve_database_url(settings), pool_size=pool_size), embedder,
                      read_engine)
        if migrate:

            upgrade_database(runtime.engine)
        if settings.auto_seed if seed is None else seed:
            runtime.seed()
        return runtime

    @property
    def embedder(self) -> Embedder:
        """The configured embedding provider (the local model loads on first use)."""
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    embedder = make_embedder(self.settings)
                    size = self.settings.query_cache_size
                    self._embedder = CachedEmbedder(embedder, size) if size else embedder
        return self._embedder

    @cached_property
    def chat(self) -> ChatModel | None:
        """The configured chat model, or None offline (tickets then get extractive answers)."""

        return make_chat_model(self.settings)

    @cached_property
    def weights(self) -> RankingWeights:
        """Ranking weights from the settings."""
        return RankingWeights(
            similarity_weight=self.settings.similarity_weight,
            recency_weight=self.settings.recency_weight,
            recency_window_days=self.settings.recency_window_days,
        )

    @cached_property
    def retrieval(self) -> RetrievalSettings:
        """Retrieval mode and fusion settings."""

        s = self.settings
        return RetrievalSettings(mode=s.retrieval_mode, fusion=s.fusion_method, vector_weight=s.hybrid_vector_weight,
                                 granularity=s.retrieval_granularity, bm25_k1=s.bm25_k1, bm25_b=s.bm25_b,
                                 bm25_title_weight=s.bm25_title_weight,
                                 statement_timeout_ms=s.search_statement_timeout_ms,
                                 approximate=s.search_approximate,
                                 approximate_candidates=s.search_approximate_candidates,
                                 ef_search=s.search_ef_search, pool=s.hybrid_pool)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work that commits on success."""
        with session_scope(self.sessions) as session:
            yield session

    def seed(self) -> int:
        """Seed the default articles once per database; returns how many were inserted."""

        with self.session() as session:
            if is_seeded(session):  # cheap check first: no model load on later starts
                return 0
            return seed_knowledge_base(session, self.embedder)

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()
        if self.read_engine is not None:
            self.read_engine.dispose()


_default: Runtime | None = None
_default_lock = threading.Lock()


def default_runtime() -> Runtime:
    """The process-wide runtime behind the top-level Python API, built from the environment."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Runtime.start()
    return _default


def set_default_runtime(runtime: Runtime | None) -> None:
    """Replace the process-wide runtime (tests, embedding in another app)."""
    global _default
    with _default_lock:
        _default = runtime
