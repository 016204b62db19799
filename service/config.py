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


@dataclass(frozen=True)
class RankingWeights:
    """``score = similarity*similarity_weight + recency*recency_weight*importance`` (service.retrieval.ranking)."""

    similarity_weight: float = 0.8
    recency_weight: float = 0.2
    recency_window_days: float = 365.0


@dataclass(frozen=True)
class RetrievalSettings:
    """Which relevance enters the formula (``mode``), how legs fuse, and what a vector stands for."""

    mode: str = "vector"
    fusion: str = "convex"  # "convex" | "rrf"
    vector_weight: float = 0.95
    rrf_k: float = 60.0
    bm25_k1: float = 1.2  # term-frequency saturation of the lexical leg (BM25)
    bm25_b: float = 0.75  # length normalisation of the lexical leg (0: none, 1: full)
    granularity: str = "section"  # "section": an article scores by its best section; "article": its own vector
    statement_timeout_ms: int = 2000
    # Opt-in, vector mode only: HNSW candidates (the nearest ``approximate_candidates`` sections and cards, read
    # with ``hnsw.ef_search``), ranked by the exact formula; results are then not proven exact.
    approximate: bool = False
    approximate_candidates: int = 400
    ef_search: int = 100
    # z-score / min-max hybrid fuses each leg's best ``pool`` articles (service.retrieval.pool).
    pool: int = 100


# The largest page (service.validation.SEARCH_LIMIT_MAX): a pool at least that big never grows with the page, so
# a page of 50 ranks the same pool, with the same relevances, as a page of 3.
HYBRID_POOL_MIN = 50


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
    # The default holds both FAQ dev sets and lifts long abstracts above either leg (README "Retrieval modes").
    retrieval_mode: str = "hybrid"
    fusion_method: str = "zscore"
    hybrid_vector_weight: float = 0.93
    hybrid_pool: int = 100  # z-score / min-max fuse each leg's best HYBRID_POOL articles
    bm25_k1: float = 1.2  # the lexical leg's BM25 (README "Retrieval")
    bm25_b: float = 0.75
    retrieval_granularity: str = "section"
    search_statement_timeout_ms: int = 2000
    # Abuse limits per client address (count, seconds) or None; see the README's "Reliability and security".
    rate_limit_tickets: tuple[int, int] | None = (10, 60)
    rate_limit_feedback: tuple[int, int] | None = (30, 60)
    rate_limit_login: tuple[int, int] | None = (10, 60)
    login_lockout: tuple[int, int] | None = (5, 900)  # failed logins per username before it is locked
    # Admin sessions (server-side): ended after this long without a request, and this long after logging in.
    session_idle_seconds: int = 1800
    session_lifetime_seconds: int = 43200
    # A ticket still unanswered this long after submission (its worker died) is answered or failed by the sweep.
    ticket_stuck_seconds: int = 300
    proxy_hops: int = 0  # trusted reverse proxies in front; their X-Forwarded-For gives the client address
    # Scale (README "Performance" and "Past one machine").
    database_read_url: str | None = None
    database_pool_size: int = 5
    query_cache_size: int = 1024
    search_approximate: bool = False
    search_approximate_candidates: int = 400
    search_ef_search: int = 100
    # The agent's side (README "For agents"): first-response target, outbound SMTP, inbound webhook.
    first_response_hours: float = 8.0
    public_url: str | None = None  # where customers reach the help center (links in e-mails)
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_username: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    smtp_starttls: bool = False
    mail_from: str = "support@localhost"
    mail_reply_to: str | None = None  # e.g. support+{token}@example.com
    inbound_email_secret: str | None = field(default=None, repr=False)
    # The knowledge loop (README "Learning from tickets").
    importance_window_days: int = 30
    importance_min_outcomes: int = 5
    importance_max_step: float = 0.25
    candidate_dedup_threshold: float = 0.62  # tuned on the dev set: bench/dedup_threshold.py
    candidate_also_asked_threshold: float = 0.60  # likewise
    # Issue 26 (docs/performance-speed.md): where the exported ONNX model is cached (default <data_dir>/models),
    # and the threads ONNX Runtime uses per process (0: one per core).
    model_dir: Path | None = None
    embedding_threads: int = 0

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
            retrieval_mode=env.get("RETRIEVAL_MODE") or "hybrid",
            fusion_method=env.get("FUSION_METHOD") or "zscore",
            hybrid_vector_weight=_float(env, "HYBRID_VECTOR_WEIGHT", 0.93),
            hybrid_pool=_int(env, "HYBRID_POOL", 100),
            bm25_k1=_float(env, "BM25_K1", 1.2),
            bm25_b=_float(env, "BM25_B", 0.75),
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
            session_idle_seconds=_int(env, "SUPPORTRAG_SESSION_IDLE_SECONDS", 1800),
            session_lifetime_seconds=_int(env, "SUPPORTRAG_SESSION_LIFETIME_SECONDS", 43200),
            ticket_stuck_seconds=_int(env, "SUPPORTRAG_TICKET_STUCK_SECONDS", 300),
            proxy_hops=_int(env, "SUPPORTRAG_PROXY_HOPS", 0),
            database_read_url=env.get("DATABASE_READ_URL") or None,
            database_pool_size=_int(env, "DATABASE_POOL_SIZE", 5),
            query_cache_size=_int(env, "QUERY_CACHE_SIZE", 1024),
            search_approximate=env.get("SEARCH_APPROXIMATE", "0").strip().lower() in ("1", "true", "yes"),
            search_approximate_candidates=_int(env, "SEARCH_APPROXIMATE_CANDIDATES", 400),
            search_ef_search=_int(env, "SEARCH_EF_SEARCH", 100),
            first_response_hours=_float(env, "FIRST_RESPONSE_HOURS", 8.0),
            public_url=(env.get("SUPPORTRAG_PUBLIC_URL") or "").rstrip("/") or None,
            smtp_host=env.get("SMTP_HOST") or None,
            smtp_port=_int(env, "SMTP_PORT", 25),
            smtp_username=env.get("SMTP_USERNAME") or None,
            smtp_password=env.get("SMTP_PASSWORD") or None,
            smtp_starttls=(env.get("SMTP_STARTTLS", "0") not in ("0", "false", "no", "")),
            mail_from=env.get("MAIL_FROM") or "support@localhost",
            mail_reply_to=env.get("MAIL_REPLY_TO") or None,
            inbound_email_secret=env.get("INBOUND_EMAIL_SECRET") or None,
            importance_window_days=_int(env, "IMPORTANCE_WINDOW_DAYS", 30),
            importance_min_outcomes=_int(env, "IMPORTANCE_MIN_OUTCOMES", 5),
            importance_max_step=_float(env, "IMPORTANCE_MAX_STEP", 0.25),
            candidate_dedup_threshold=_float(env, "CANDIDATE_DEDUP_THRESHOLD", 0.62),
            candidate_also_asked_threshold=_float(env, "CANDIDATE_ALSO_ASKED_THRESHOLD", 0.60),
            # Issue 26: the ONNX model cache and its threads.
            model_dir=Path(env["SUPPORTRAG_MODEL_DIR"]).expanduser() if env.get("SUPPORTRAG_MODEL_DIR") else None,
            embedding_threads=_int(env, "EMBEDDING_THREADS", 0),
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
        if self.fusion_method not in ("convex", "rrf", "minmax", "zscore"):
            raise ConfigError("FUSION_METHOD must be convex, rrf, minmax or zscore")
        if not self.bm25_k1 >= 0.0 or not 0.0 <= self.bm25_b <= 1.0:
            raise ConfigError("BM25_K1 must not be negative and BM25_B must be between 0 and 1")
        if not 0.0 <= self.hybrid_vector_weight <= 1.0:
            raise ConfigError("HYBRID_VECTOR_WEIGHT must be between 0 and 1")
        if not HYBRID_POOL_MIN <= self.hybrid_pool <= 10_000:
            raise ConfigError(f"HYBRID_POOL must be between {HYBRID_POOL_MIN} and 10000")
        if self.retrieval_granularity not in ("section", "article"):
            raise ConfigError(f"RETRIEVAL_GRANULARITY must be section or article, got {self.retrieval_granularity!r}")
        if self.search_statement_timeout_ms < 1:
            raise ConfigError("SEARCH_STATEMENT_TIMEOUT_MS must be positive")
        for name, weight in (("SEARCH_SIMILARITY_WEIGHT", self.similarity_weight),
                             ("SEARCH_RECENCY_WEIGHT", self.recency_weight)):
            # 0, or large enough that weight × recency × importance (each ≥ 1e-16) never underflows a double.
            if not (weight == 0 or 1e-6 <= weight <= 1e6):
                raise ConfigError(f"{name} must be 0 or between 1e-6 and 1e6, got {weight!r}")
        if not 1 <= self.session_idle_seconds <= self.session_lifetime_seconds:
            raise ConfigError("SUPPORTRAG_SESSION_IDLE_SECONDS must be at least 1 and at most "
                              "SUPPORTRAG_SESSION_LIFETIME_SECONDS")
        if self.ticket_stuck_seconds < 1:
            raise ConfigError("SUPPORTRAG_TICKET_STUCK_SECONDS must be at least 1")
        if self.proxy_hops < 0:
            raise ConfigError("SUPPORTRAG_PROXY_HOPS must not be negative")
        if self.database_pool_size < 1:
            raise ConfigError("DATABASE_POOL_SIZE must be at least 1")
        if self.query_cache_size < 0:
            raise ConfigError("QUERY_CACHE_SIZE must not be negative")
        if self.search_approximate_candidates < 1 or not 1 <= self.search_ef_search <= 1000:
            raise ConfigError("SEARCH_APPROXIMATE_CANDIDATES must be positive and SEARCH_EF_SEARCH 1-1000")
        if not self.first_response_hours > 0:
            raise ConfigError("FIRST_RESPONSE_HOURS must be positive")
        if self.mail_reply_to is not None and self.mail_reply_to.count("{token}") != 1:
            raise ConfigError("MAIL_REPLY_TO must contain {token} once, e.g. support+{token}@example.com")
        if any(c in (self.mail_from + (self.mail_reply_to or "")) for c in "\r\n"):
            raise ConfigError("MAIL_FROM and MAIL_REPLY_TO must be one line")
        if not 1 <= self.importance_window_days <= 3650 or self.importance_min_outcomes < 1:
            raise ConfigError("IMPORTANCE_WINDOW_DAYS must be 1-3650 and IMPORTANCE_MIN_OUTCOMES at least 1")
        if not 0 < self.importance_max_step <= 2:
            raise ConfigError("IMPORTANCE_MAX_STEP must be above 0 and at most 2")
        if not (-1 <= self.candidate_dedup_threshold <= 1 and -1 <= self.candidate_also_asked_threshold <= 1):
            raise ConfigError("CANDIDATE_DEDUP_THRESHOLD and CANDIDATE_ALSO_ASKED_THRESHOLD must be between -1 and 1")
        if not 0 <= self.port <= 65535:
            raise ConfigError("PORT must be between 0 and 65535")
        if not 0 <= self.embedding_threads <= 256:  # issue 26
            raise ConfigError("EMBEDDING_THREADS must be between 0 (one per core) and 256")

    @property
    def model_cache_dir(self) -> Path:
        """Where the local model's exported ONNX graph is cached (issue 26)."""
        return self.model_dir or self.data_dir / "models"

    @property
    def embedded_pgdata(self) -> Path:
        """Data directory of the embedded PostgreSQL server."""
        return self.data_dir / "pgdata"
