"""Helpers shared by the tests: the error-shape assertion, test embedders, the CLI runner."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from click.testing import CliRunner, Result

from service.cli.main import main
from service.config import LOCAL_MODEL_NAME
from service.providers.embeddings import EmbeddingError

LOCAL_EMBEDDER_NAME = f"local:{LOCAL_MODEL_NAME}"


def assert_error(response, status: int, code: str) -> dict[str, Any]:
    """Assert the one error shape ``{"error": {"code", "message", "details"}}``; return the inner object."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    return error


class CountingEmbedder:
    """Delegates to a real embedder and records each batch (``calls``) and every text (``texts``) it was given.

    ``model_name`` may be overridden to pose as another model (rows embedded by it then count as stale).
    """

    def __init__(self, inner, model_name: str | None = None) -> None:
        self.inner = inner
        self.model_name = model_name or inner.model_name
        self.dimensions = inner.dimensions
        self.calls: list[list[str]] = []
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Record the batch, then embed it with the real model."""
        self.calls.append(list(texts))
        self.texts.extend(texts)
        return self.inner.embed(texts)


class FailingEmbedder:
    """The local model's name, but every call fails as a provider outage would (``error`` is raised)."""

    dimensions = 384

    def __init__(self, error: Exception | None = None, model_name: str = LOCAL_EMBEDDER_NAME) -> None:
        self.error = error or EmbeddingError("provider unavailable")
        self.model_name = model_name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Fail."""
        raise self.error


class MemoEmbedder:
    """The real local model with a memo of the vectors it already computed (same text → same vector).

    Shared by the whole test session so the seed articles and common queries are embedded once.
    """

    def __init__(self, inner) -> None:
        self.inner, self.model_name, self.dimensions = inner, inner.model_name, inner.dimensions
        self._memo: dict[str, np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:
        """Everything else (the input window, the tokenizer) is the real model's."""
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, computing only the ones not seen before."""
        missing = list(dict.fromkeys(text for text in texts if text not in self._memo))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing)):
                self._memo[text] = vector
        return np.stack([self._memo[text] for text in texts]) if texts else self.inner.embed(texts)


def run_cli(*args: str | Path, expect_success: bool = True) -> Result:
    """Invoke the console script in-process; by default fail with its output unless it exits 0."""
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    gc.collect()  # finalise anything the command left open here, so a leak fails the test that caused it
    if expect_success:
        assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    return result


def run_cli_json(*args: str | Path) -> Any:
    """Invoke a ``--json`` command and parse its stdout."""
    return json.loads(run_cli(*args, "--json").stdout)


# Settings a developer's shell may carry that would change what the CLI and server tests see.
ENVIRONMENT_OVERRIDES = (
    "EMBEDDING_PROVIDER", "EMBEDDING_API_KEY", "EMBEDDING_BASE_URL", "EMBEDDING_MODEL", "EMBEDDING_DIMENSIONS",
    "SEARCH_SIMILARITY_WEIGHT", "SEARCH_RECENCY_WEIGHT", "SEARCH_RECENCY_WINDOW_DAYS", "SUPPORTRAG_AUTO_SEED",
    "RETRIEVAL_MODE", "FUSION_METHOD", "HYBRID_VECTOR_WEIGHT", "HYBRID_POOL", "SUPPORTRAG_PUBLIC_SEARCH",
    "SUPPORTRAG_PUBLIC_TICKETS", "ANSWER_MIN_SIMILARITY", "LLM_API_KEY", "LLM_BASE_URL", "LLM_MODEL",
    "LLM_TIMEOUT", "LLM_MAX_RETRIES", "LLM_TEMPERATURE", "LLM_MAX_TOKENS", "SUPPORTRAG_HOST", "PORT",
    "WEB_CONCURRENCY", "SUPPORTRAG_RATE_LIMIT_TICKETS", "SUPPORTRAG_RATE_LIMIT_FEEDBACK", "SUPPORTRAG_RATE_LIMIT_LOGIN",
    "SUPPORTRAG_LOGIN_LOCKOUT", "SUPPORTRAG_PROXY_HOPS", "SEARCH_APPROXIMATE", "SEARCH_APPROXIMATE_CANDIDATES",
    "SEARCH_EF_SEARCH",
    "SMTP_HOST", "SMTP_PORT", "MAIL_FROM", "MAIL_REPLY_TO", "INBOUND_EMAIL_SECRET", "FIRST_RESPONSE_HOURS",
    "SUPPORTRAG_PUBLIC_URL",
    "IMPORTANCE_WINDOW_DAYS", "IMPORTANCE_MIN_OUTCOMES", "IMPORTANCE_MAX_STEP", "CANDIDATE_DEDUP_THRESHOLD",
    "CANDIDATE_ALSO_ASKED_THRESHOLD",
    "BM25_K1", "BM25_B",
    "IMAP_HOST", "IMAP_PORT", "IMAP_USERNAME", "IMAP_PASSWORD", "IMAP_TLS", "IMAP_FOLDER", "IMAP_PROCESSED_FOLDER",
    "IMAP_POLL_SECONDS",
)
