"""Settings: read once from the environment, in one place."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import platformdirs

VECTOR_DIMENSIONS = 1536
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"


class ConfigError(ValueError):
    """A setting has a value the service cannot run with."""


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("supportrag"))


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {raw!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


_PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RATE_LIMIT = re.compile(r"^(?P<count>\d+)\s*/\s*(?P<number>\d+)?\s*(?:(?P<unit>second|minute|hour|day)s?)?$")


def parse_rate_limit(name: str, raw: str | None, default: str) -> tuple[int, int] | None:
    """``"10/minute"``, ``"5/15minutes"`` or ``"10/60"`` (seconds) → (count, seconds); ``"off"``/``"0"`` → None."""
    value = (raw or default).strip().lower()
    if value in ("0", "off", "none"):
        return None
    match = _RATE_LIMIT.match(value)
    if not match or int(match["count"]) < 1 or not (match["number"] or match["unit"]):
        raise ConfigError(f"{name} must look like '10/minute', '5/15minutes' or '10/60' (seconds), "
                          f"or be 'off'; got {value!r}")
    seconds = int(match["number"] or 1) * _PERIODS[match["unit"] or "second"]
    if seconds < 1:
        raise ConfigError(f"{name} needs a period of at least one second, got {value!r}")
    return int(match["count"]), seconds


@dataclass(frozen=True)
class Settings:
    """Every tunable of the service; see the README's configuration table."""

    database_url: str | None = None
    data_dir: Path = field(default_factory=_default_data_dir)
    embedding_provider: str = "local"
    embedding_model: str = LOCAL_MODEL_NAME
    embedding_api_key: str | None = None
    embedding_base_url: str | None = None
    embedding_dimensions: int | None = None
    embedding_timeout: float = 30.0
    embedding_max_retries: int = 3
    embedding_batch_size: int = 64
    embedding_max_tokens: int = 8191  # OpenAI embedding models' input window
    similarity_weight: float = 0.8
    recency_weight: float = 0.2
    recency_window_days: float = 365.0
    host: str = "127.0.0.1"
    port: int = 5000
    max_request_bytes: int = 1024 * 1024
    auto_seed: bool = True
    llm_api_key: str | None = None
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_timeout: float = 30.0
    llm_max_retries: int = 2
    llm_temperature: float = 0.1
    llm_max_tokens: int = 600
    llm_context_chars: int = 6000
    answer_min_similarity: float = 0.30
    # Admin and access: see docs/admin.md. The secret key never appears in a repr or log line.
    secret_key: str | None = field(default=None, repr=False)
    public_search: bool = True
    public_tickets: bool = True
    secure_cookies: bool = False
    retrieval_mode: str = "vector"
    fusion_method: str = "convex"
    hybrid_vector_weight: float = 0.95
    retrieval_granularity: str = "section"
    search_statement_timeout_ms: int = 2000
    # Abuse limits per client address (count, seconds) or None; see the README's "Reliability and security".
    rate_limit_tickets: tuple[int, int] | None = (10, 60)
    rate_limit_feedback: tuple[int, int] | None = (30, 60)
    rate_limit_login: tuple[int, int] | None = (10, 60)
    login_lockout: tuple[int, int] | None = (5, 900)  # failed logins per username before it is locked
    proxy_hops: int = 0  # trusted reverse proxies in front; their X-Forwarded-For gives the client address
    # Scale (README "Performance" and "Past one machine").
    database_read_url: str | None = None
    database_pool_size: int = 5
    query_cache_size: int = 1024
    search_approximate: bool = False
    search_approximate_candidates: int = 400
    search_ef_search: int = 100

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """Build settings from environment variables (``os.environ`` by default)."""
        env = os.environ if env is None else env
        api_key = env.get("EMBEDDING_API_KEY") or None
        base_url = env.get("EMBEDDING_BASE_URL") or None
        provider = env.get("EMBEDDING_PROVIDER") or ("openai" if api_key or base_url else "local")
        if provider not in ("local", "openai"):
            raise ConfigError(f"EMBEDDING_PROVIDER must be 'local' or 'openai', got {provider!r}")
        default_model = LOCAL_MODEL_NAME if provider == "local" else OPENAI_DEFAULT_MODEL
        settings = cls(
            database_url=env.get("DATABASE_URL") or None,
            data_dir=Path(env["SUPPORTRAG_DATA_DIR"]).expanduser()
            if env.get("SUPPORTRAG_DATA_DIR")
            else _default_data_dir(),
            embedding_provider=provider,
            embedding_model=env.get("EMBEDDING_MODEL") or default_model,
            embedding_api_key=api_key,
            embedding_base_url=base_url,
            embedding_dimensions=_int(env, "EMBEDDING_DIMENSIONS", None),
            embedding_timeout=_float(env, "EMBEDDING_TIMEOUT", 30.0),
            embedding_max_retries=_int(env, "EMBEDDING_MAX_RETRIES", 3),
            embedding_batch_size=_int(env, "EMBEDDING_BATCH_SIZE", 64),
            embedding_max_tokens=_int(env, "EMBEDDING_MAX_TOKENS", 8191),
            similarity_weight=_float(env, "SEARCH_SIMILARITY_WEIGHT", 0.8),
            recency_weight=_float(env, "SEARCH_RECENCY_WEIGHT", 0.2),
            recency_window_days=_float(env, "SEARCH_RECENCY_WINDOW_DAYS", 365.0),
            host=env.get("SUPPORTRAG_HOST") or "127.0.0.1",
            port=_int(env, "PORT", 5000),
            max_request_bytes=_int(env, "SUPPORTRAG_MAX_REQUEST_BYTES", 1024 * 1024),
            auto_seed=(env.get("SUPPORTRAG_AUTO_SEED", "1") not in ("0", "false", "no")),
            llm_api_key=env.get("LLM_API_KEY") or None,
            llm_base_url=env.get("LLM_BASE_URL") or None,
            llm_model=env.get("LLM_MODEL") or "gpt-4o-mini",
            llm_timeout=_float(env, "LLM_TIMEOUT", 30.0),
            llm_max_retries=_int(env, "LLM_MAX_RETRIES", 2),
            llm_temperature=_float(env, "LLM_TEMPERATURE", 0.1),
            llm_max_tokens=_int(env, "LLM_MAX_TOKENS", 600),
            llm_context_chars=_int(env, "LLM_CONTEXT_CHARS", 6000),
            answer_min_similarity=_float(env, "ANSWER_MIN_SIMILARITY", 0.30),
            secret_key=env.get("SUPPORTRAG_SECRET_KEY") or None,
            public_search=(env.get("SUPPORTRAG_PUBLIC_SEARCH", "1") not in ("0", "false", "no")),
            public_tickets=(env.get("SUPPORTRAG_PUBLIC_TICKETS", "1") not in ("0", "false", "no")),
            secure_cookies=(env.get("SUPPORTRAG_SECURE_COOKIES", "0") not in ("0", "false", "no", "")),
            retrieval_mode=env.get("RETRIEVAL_MODE") or "vector",
            fusion_method=env.get("FUSION_METHOD") or "convex",
            hybrid_vector_weight=_float(env, "HYBRID_VECTOR_WEIGHT", 0.95),
            retrieval_granularity=env.get("RETRIEVAL_GRANULARITY") or "section",
            search_statement_timeout_ms=_int(env, "SEARCH_STATEMENT_TIMEOUT_MS", 2000),
            rate_limit_tickets=parse_rate_limit("SUPPORTRAG_RATE_LIMIT_TICKETS",
                                                env.get("SUPPORTRAG_RATE_LIMIT_TICKETS"), "10/minute"),
            rate_limit_feedback=parse_rate_limit("SUPPORTRAG_RATE_LIMIT_FEEDBACK",
                                                 env.get("SUPPORTRAG_RATE_LIMIT_FEEDBACK"), "30/minute"),
            rate_limit_login=parse_rate_limit("SUPPORTRAG_RATE_LIMIT_LOGIN",
                                              env.get("SUPPORTRAG_RATE_LIMIT_LOGIN"), "10/minute"),
            login_lockout=parse_rate_limit("SUPPORTRAG_LOGIN_LOCKOUT", env.get("SUPPORTRAG_LOGIN_LOCKOUT"),
                                           "5/15minutes"),
            proxy_hops=_int(env, "SUPPORTRAG_PROXY_HOPS", 0),
            database_read_url=env.get("DATABASE_READ_URL") or None,
            database_pool_size=_int(env, "DATABASE_POOL_SIZE", 5),
            query_cache_size=_int(env, "QUERY_CACHE_SIZE", 1024),
            search_approximate=env.get("SEARCH_APPROXIMATE", "0").strip().lower() in ("1", "true", "yes"),
            search_approximate_candidates=_int(env, "SEARCH_APPROXIMATE_CANDIDATES", 400),
            search_ef_search=_int(env, "SEARCH_EF_SEARCH", 100),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse settings that would make scores or vectors meaningless."""
        if self.recency_window_days <= 0:
            raise ConfigError("SEARCH_RECENCY_WINDOW_DAYS must be positive")
        if self.embedding_dimensions is not None and not 1 <= self.embedding_dimensions <= VECTOR_DIMENSIONS:
            raise ConfigError(f"EMBEDDING_DIMENSIONS must be between 1 and {VECTOR_DIMENSIONS}")
        if self.embedding_batch_size < 1:
            raise ConfigError("EMBEDDING_BATCH_SIZE must be at least 1")
        if self.embedding_max_tokens < 32:
            raise ConfigError("EMBEDDING_MAX_TOKENS must be at least 32")
        if not self.embedding_timeout > 0:
            raise ConfigError("EMBEDDING_TIMEOUT must be positive")
        if self.embedding_max_retries < 0:
            raise ConfigError("EMBEDDING_MAX_RETRIES must not be negative")
        if self.max_request_bytes < 1:
            raise ConfigError("SUPPORTRAG_MAX_REQUEST_BYTES must be positive")
        if not self.llm_timeout > 0:
            raise ConfigError("LLM_TIMEOUT must be positive")
        if self.llm_max_retries < 0 or self.llm_max_tokens < 1:
            raise ConfigError("LLM_MAX_RETRIES must be >= 0 and LLM_MAX_TOKENS >= 1")
        if self.llm_context_chars < 500:
            raise ConfigError("LLM_CONTEXT_CHARS must be at least 500")
        if not -1.0 <= self.answer_min_similarity <= 1.0:
            raise ConfigError("ANSWER_MIN_SIMILARITY must be between -1 and 1")
        if self.retrieval_mode not in ("vector", "lexical", "hybrid"):
            raise ConfigError("RETRIEVAL_MODE must be vector, lexical or hybrid")
        if self.fusion_method not in ("convex", "rrf"):
            raise ConfigError("FUSION_METHOD must be convex or rrf")
        if not 0.0 <= self.hybrid_vector_weight <= 1.0:
            raise ConfigError("HYBRID_VECTOR_WEIGHT must be between 0 and 1")
        if self.retrieval_granularity not in ("section", "article"):
            raise ConfigError(f"RETRIEVAL_GRANULARITY must be section or article, got {self.retrieval_granularity!r}")
        if self.search_statement_timeout_ms < 1:
            raise ConfigError("SEARCH_STATEMENT_TIMEOUT_MS must be positive")
        if self.proxy_hops < 0:
            raise ConfigError("SUPPORTRAG_PROXY_HOPS must not be negative")
        if self.database_pool_size < 1:
            raise ConfigError("DATABASE_POOL_SIZE must be at least 1")
        if self.query_cache_size < 0:
            raise ConfigError("QUERY_CACHE_SIZE must not be negative")
        if self.search_approximate_candidates < 1 or not 1 <= self.search_ef_search <= 1000:
            raise ConfigError("SEARCH_APPROXIMATE_CANDIDATES must be positive and SEARCH_EF_SEARCH 1-1000")
        if not 0 <= self.port <= 65535:
            raise ConfigError("PORT must be between 0 and 65535")

    @property
    def embedded_pgdata(self) -> Path:
        """Data directory of the embedded PostgreSQL server."""
        return self.data_dir / "pgdata"
