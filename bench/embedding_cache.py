"""An embedder wrapper that keeps every vector it computed on disk, so evaluation sweeps never re-embed a corpus.

The cache lives under ``artifacts/`` (git-ignored), one file per model: ``<model>.npz`` with the texts' SHA-256
digests and their vectors. Only benchmarks use it; the service embeds through its own providers.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

CACHE_DIR = Path(__file__).resolve().parent.parent / "artifacts" / "embedding_cache"
SAVE_EVERY = 2_000  # new vectors between saves (a long corpus survives an interrupted run)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DiskCachedEmbedder:
    """The real embedder, remembering its vectors in ``CACHE_DIR`` across runs (same text → same vector)."""

    def __init__(self, inner: Any, cache_dir: Path = CACHE_DIR) -> None:
        self.inner, self.model_name, self.dimensions = inner, inner.model_name, inner.dimensions
        self.path = cache_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', inner.model_name)}.npz"
        self._vectors: dict[str, np.ndarray] = {}
        self._unsaved = 0
        if self.path.exists():
            with np.load(self.path) as stored:
                self._vectors = dict(zip(stored["digests"].tolist(), stored["vectors"]))

    def __getattr__(self, name: str) -> Any:
        """Everything else (the input window, the tokenizer) is the real model's."""
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, computing only the ones never seen (in this run or a previous one)."""
        digests = [_digest(text) for text in texts]
        missing = list(dict.fromkeys((d, t) for d, t in zip(digests, texts) if d not in self._vectors))
        if missing:
            for (digest, _), vector in zip(missing, self.inner.embed([t for _, t in missing])):
                self._vectors[digest] = np.asarray(vector, dtype=np.float32)
            self._unsaved += len(missing)
            if self._unsaved >= SAVE_EVERY:
                self.save()
        return np.stack([self._vectors[d] for d in digests]) if texts else self.inner.embed(texts)

    def save(self) -> None:
        """Write the cache (atomically: a crash mid-write leaves the previous file)."""
        if not self._vectors:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():  # another run may have saved since this one loaded: keep its vectors too
            with np.load(self.path) as stored:
                for digest, vector in zip(stored["digests"].tolist(), stored["vectors"]):
                    self._vectors.setdefault(digest, vector)
        partial = self.path.with_suffix(".partial.npz")
        digests = list(self._vectors)
        np.savez(partial, digests=np.array(digests), vectors=np.stack([self._vectors[d] for d in digests]))
        partial.replace(self.path)
        self._unsaved = 0
