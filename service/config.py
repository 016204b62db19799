"""Settings: read once from the environment, in one place; every field is a row of the table (service.config_table)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import platformdirs

from service.config_table import ConfigError, check_fields, directory, flag, integer, number, rate, \
    read_environment, text

VECTOR_DIMENSIONS = 1536
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"


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
    bm25_title_weight: float = 3.0  # a card's title occurrence counts this many body occurrences (BM25F-style)
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
    """The per-user data folder (``~/.local/share/supportrag`` on Linux)."""
    return Path(platformdirs.user_data_dir("supportrag"))


def _weight_is_safe(weight: float) -> bool:
    """0, or large enough that weight × recency × importance (each ≥ 1e-16) never underflows a double."""
    return weight == 0 or 1e-6 <= weight <= 1e6


def _embedding_provider(values: Mapping[str, Any]) -> str:
    """``openai`` when a key or base URL is configured, else the local model."""
    return "openai" if values["embedding_api_key"] or values["embedding_base_url"] else "local"


def _embedding_model(values: Mapping[str, Any]) -> str:
    """Each provider's default model."""
    return LOCAL_MODEL_NAME if values["embedding_provider"] == "local" else OPENAI_DEFAULT_MODEL


def _email_address(name: str, raw: str) -> str | None:
    """One e-mail address (the team's notification address)."""
    value = raw.strip()
    if "@" not in value:
        raise ConfigError(f"{name} must be one e-mail address, got {raw!r}")
    return value or None


_HEX_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}){1,2}")


def _brand_color(name: str, raw: str) -> str:
    """A CSS hex colour (``#0a7`` or ``#00aa77``): it goes into the help center's style sheet as is."""
    value = raw.strip()
    if not _HEX_COLOR.fullmatch(value):
        raise ConfigError(f"{name} must be a hex colour such as #1f6feb, got {raw!r}")
    return value


@dataclass(frozen=True)
class Brand:
    """What customers see of the product: its name, accent colour and logo (the help center, e-mails, widget)."""

    name: str | None = None  # None: the service's own "supportrag help center"
    color: str | None = None
    logo: Path | None = None

    @property
    def signature(self) -> str | None:
        """The e-mails' sign-off, ``Tallybook Support``; None without a name."""
        return f"{self.name} Support" if self.name else None
def _origins(name: str, raw: str) -> tuple[str, ...]:
    """Origins (scheme://host[:port]), space- or comma-separated, without paths."""
    origins = tuple(part.rstrip("/") for part in re.split(r"[\s,]+", raw) if part)
    for origin in origins:
        if not re.fullmatch(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?", origin):
            raise ConfigError(f"{name} must list origins like https://shop.example.com, got {origin!r}")
    return origins


def _public_url(_name: str, raw: str) -> str | None:
    """The help center's address without a trailing slash."""
    return raw.rstrip("/") or None


DATABASE, EMBEDDING, RETRIEVAL, TICKETS, MAIL, WEB, LEARNING = (
    "database", "embedding", "retrieval", "tickets", "mail", "web", "learning")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every tunable of the service, grouped by area; each field is declared with its variable, default and help."""

    # ---- database
    database_url: str | None = text(
        "DATABASE_URL", None, "PostgreSQL with pgvector ≥ 0.7 (`postgresql://user:pass@host/db`); unset = the "
        "embedded server", area=DATABASE)
    database_read_url: str | None = text(
        "DATABASE_READ_URL", None, "a read replica of `DATABASE_URL`: searches run there, everything else on the "
        "primary", area=DATABASE)
    database_pool_size: int = integer(
        "DATABASE_POOL_SIZE", 5, "connections per process pool (overflow up to twice as many); `serve` sets it to "
        "its threads per worker", area=DATABASE, low=1)
    data_dir: Path = directory(
        "SUPPORTRAG_DATA_DIR", _default_data_dir,
        "where the embedded server keeps `pgdata/`", area=DATABASE,
        default_text="per-user data folder (`~/.local/share/supportrag`)")
    auto_seed: bool = flag("SUPPORTRAG_AUTO_SEED", True, "seed the default articles into a new database",
                           area=DATABASE)

    # ---- embedding (the key and URL come first: the provider's default depends on them)
    embedding_api_key: str | None = text(
        "EMBEDDING_API_KEY", None, "key for the OpenAI-compatible embedding API", area=EMBEDDING, secret=True)
    embedding_base_url: str | None = text(
        "EMBEDDING_BASE_URL", None, "base URL of an OpenAI-compatible embedding API, e.g. "
        "`http://localhost:8080/v1`", area=EMBEDDING, default_text="unset (api.openai.com)")
    embedding_provider: str = text(
        "EMBEDDING_PROVIDER", "local", "`local` (MiniLM on this machine) or `openai` (any OpenAI-compatible API)",
        area=EMBEDDING, choices=("local", "openai"), derive=_embedding_provider,
        default_text="`openai` if `EMBEDDING_API_KEY` or `EMBEDDING_BASE_URL` is set, else `local`")
    embedding_model: str = text(
        "EMBEDDING_MODEL", LOCAL_MODEL_NAME, "embedding model name", area=EMBEDDING, derive=_embedding_model,
        default_text=f"`{LOCAL_MODEL_NAME}` (local), `{OPENAI_DEFAULT_MODEL}` (openai)")
    embedding_dimensions: int | None = integer(
        "EMBEDDING_DIMENSIONS", None, "sent as `dimensions` to models that support it", area=EMBEDDING, low=1,
        high=VECTOR_DIMENSIONS)
    embedding_timeout: float = number("EMBEDDING_TIMEOUT", 30.0, "seconds per embedding request", area=EMBEDDING,
                                      check=lambda value: value > 0, rule="positive")
    embedding_max_retries: int = integer(
        "EMBEDDING_MAX_RETRIES", 3, "retries with exponential backoff on 408/409/429/5xx and connection errors",
        area=EMBEDDING, low=0)
    embedding_batch_size: int = integer("EMBEDDING_BATCH_SIZE", 64, "texts per embedding call", area=EMBEDDING,
                                        low=1)
    embedding_max_tokens: int = integer(
        "EMBEDDING_MAX_TOKENS", 8191, "input window of an OpenAI-compatible model (tokens, estimated at 3 "
        "characters each); longer sections are embedded as overlapping windows. The local MiniLM reports its own",
        area=EMBEDDING, low=32)
    model_dir: Path | None = text(
        "SUPPORTRAG_MODEL_DIR", None, "where the local model's exported ONNX graph is cached (`supportrag model "
        "export` writes it ahead of time)", area=EMBEDDING, parse=lambda _name, raw: Path(raw).expanduser(),
        default_text="`<SUPPORTRAG_DATA_DIR>/models`")
    embedding_threads: int = integer(
        "EMBEDDING_THREADS", 0, "ONNX Runtime threads per process for the local model (`0`: one per core; `serve` "
        "sets 1 per worker)", area=EMBEDDING, low=0, high=256)
    embedding_precision: str = text(
        "EMBEDDING_PRECISION", "fp32", "which exported graph of the local model runs: `fp32` (the reference's "
        "vectors to float rounding) or `int8` (the feed-forward MatMuls quantized: ~1.5× faster, vectors at a mean "
        "cosine of 0.996, but covidfaq_dev's nDCG@10 falls by 0.027, so it is not the default; "
        "docs/performance-speed.md)",
        area=EMBEDDING, choices=("fp32", "int8"))
    query_cache_size: int = integer(
        "QUERY_CACHE_SIZE", 1024, "query embeddings remembered per process (repeated ticket subjects); `0` turns "
        "the cache off", area=EMBEDDING, low=0)

    # ---- retrieval
    similarity_weight: float = number(
        "SEARCH_SIMILARITY_WEIGHT", 0.8, "weight of relevance (similarity) in the score", area=RETRIEVAL,
        check=_weight_is_safe, rule="0 or between 1e-6 and 1e6")
    recency_weight: float = number("SEARCH_RECENCY_WEIGHT", 0.2, "weight of recency × importance in the score",
                                   area=RETRIEVAL, check=_weight_is_safe, rule="0 or between 1e-6 and 1e6")
    recency_window_days: float = number("SEARCH_RECENCY_WINDOW_DAYS", 365.0, "age at which recency reaches 0",
                                        area=RETRIEVAL, check=lambda value: value > 0, rule="positive")
    retrieval_mode: str = text(
        "RETRIEVAL_MODE", "vector", "relevance that enters the formula: `vector` (the cosine similarity: the card's "
        "formula), `lexical` (BM25), or `hybrid` (both fused, in the similarity's place)",
        area=RETRIEVAL, choices=("vector", "lexical", "hybrid"))
    fusion_method: str = text(
        "FUSION_METHOD", "zscore", "hybrid fusion: `zscore` / `minmax` over each leg's best `HYBRID_POOL` "
        "articles, `convex` (w·cosine + (1−w)·BM25/best BM25) or `rrf` (reciprocal rank fusion)", area=RETRIEVAL,
        choices=("convex", "rrf", "minmax", "zscore"))
    hybrid_vector_weight: float = number("HYBRID_VECTOR_WEIGHT", 0.93, "w, the vector leg's weight in hybrid fusion",
                                         area=RETRIEVAL, low=0.0, high=1.0)
    hybrid_pool: int = integer(
        "HYBRID_POOL", 100, "`zscore` / `minmax`: how many of each leg's best articles are fused (never below the "
        "largest page, so a longer page ranks the same pool)", area=RETRIEVAL, low=HYBRID_POOL_MIN, high=10_000)
    bm25_k1: float = number("BM25_K1", 1.2, "the lexical leg's BM25 term-frequency saturation", area=RETRIEVAL,
                            low=0.0)
    bm25_b: float = number("BM25_B", 0.75, "the lexical leg's BM25 length normalisation (0 none, 1 full)",
                           area=RETRIEVAL, low=0.0, high=1.0)
    bm25_title_weight: float = number(
        "BM25_TITLE_WEIGHT", 3.0, "the lexical leg's title weight: a title occurrence counts this many body "
        "occurrences (BM25F-style)", area=RETRIEVAL, low=0.0, high=100.0)
    retrieval_granularity: str = text(
        "RETRIEVAL_GRANULARITY", "section", "`section`: an article scores by the best of its sections' vectors and "
        "its own; `article`: its own vector (title + lead) only", area=RETRIEVAL, choices=("section", "article"))
    search_statement_timeout_ms: int = integer(
        "SEARCH_STATEMENT_TIMEOUT_MS", 2000, "statement timeout of the full-text queries; a hybrid search past it "
        "answers by its vector leg", area=RETRIEVAL, low=1)
    search_approximate: bool = flag(
        "SEARCH_APPROXIMATE", False, "vector search ranks the HNSW candidates of `supportrag db hnsw` by the exact "
        "formula instead of scanning (results say `\"exact\": false`)", area=RETRIEVAL)
    search_approximate_candidates: int = integer(
        "SEARCH_APPROXIMATE_CANDIDATES", 400, "approximate mode: the nearest sections (and as many cards) whose "
        "articles are ranked", area=RETRIEVAL, low=1)
    search_ef_search: int = integer("SEARCH_EF_SEARCH", 100, "approximate mode: `hnsw.ef_search`", area=RETRIEVAL,
                                    low=1, high=1000)

    # ---- tickets
    answer_min_similarity: float = number(
        "ANSWER_MIN_SIMILARITY", 0.30, "answerability gate: below this best cosine similarity a ticket goes to an "
        "agent", area=TICKETS, low=-1.0, high=1.0)
    answer_gate: str = text(
        "ANSWER_GATE", "calibrated", "`calibrated`: answer when the calibrated confidence reaches the threshold chosen "
        "for `ANSWER_TARGET_PRECISION` (and the best cosine reaches `ANSWER_MIN_SIMILARITY`); `floor`: the best "
        "cosine alone decides (docs/answer-gate.md says what that costs)", area=TICKETS,
        choices=("calibrated", "floor"))
    answer_target_precision: float = number(
        "ANSWER_TARGET_PRECISION", 0.90, "calibrated gate: the precision among answered tickets the threshold is "
        "chosen for (`supportrag gate calibrate`, the AI answers page)", area=TICKETS,
        check=lambda value: 0.5 < value < 0.999, rule="between 0.5 and 0.999 (exclusive)")
    answer_confidence_level: float = number(
        "ANSWER_CONFIDENCE_LEVEL", 0.90, "calibrated gate: the confidence of the Clopper–Pearson lower bound on "
        "precision", area=TICKETS, check=lambda value: 0.5 <= value < 1.0, rule="at least 0.5, below 1")
    review_match_similarity: float = number(
        "REVIEW_MATCH_SIMILARITY", 0.80, "calibrated gate: a question whose cosine to a reviewed ticket's question "
        "reaches this, answered from the same article, takes the reviewer's verdict (wrong: handed off; right: "
        "answered); 1 keeps it to the very same question", area=TICKETS, low=0.5, high=1.0)
    review_sample_rate: float = number(
        "REVIEW_SAMPLE_RATE", 0.10, "share of answered and handed-off tickets drawn, uniformly at random, into the "
        "workspace's review queue", area=TICKETS, low=0.0, high=1.0)
    llm_api_key: str | None = text(
        "LLM_API_KEY", None, "key of the OpenAI-compatible chat API; with `LLM_BASE_URL` unset too, answers are "
        "extractive", area=TICKETS, secret=True)
    llm_base_url: str | None = text("LLM_BASE_URL", None, "base URL of an OpenAI-compatible chat API",
                                    area=TICKETS, default_text="unset (api.openai.com)")
    llm_model: str = text("LLM_MODEL", "gpt-4o-mini", "chat model", area=TICKETS)
    llm_timeout: float = number("LLM_TIMEOUT", 30.0, "seconds per chat request", area=TICKETS,
                                check=lambda value: value > 0, rule="positive")
    llm_max_retries: int = integer(
        "LLM_MAX_RETRIES", 2, "retries with exponential backoff on 408/409/429/5xx and connection errors",
        area=TICKETS, low=0)
    llm_temperature: float = number("LLM_TEMPERATURE", 0.1, "sampling temperature", area=TICKETS)
    llm_max_tokens: int = integer("LLM_MAX_TOKENS", 600, "longest answer", area=TICKETS, low=1)
    llm_context_chars: int = integer(
        "LLM_CONTEXT_CHARS", 6000, "budget for the matched sections sent to the model (in rank order; the last one "
        "kept is cut at a word)", area=TICKETS, low=500)
    ticket_stuck_seconds: int = integer(
        "SUPPORTRAG_TICKET_STUCK_SECONDS", 300, "a ticket still `received` this long after submission (its worker "
        "died) is answered again or marked `failed` by the sweep", area=TICKETS, low=1)
    first_response_hours: float = number(
        "FIRST_RESPONSE_HOURS", 8.0, "first-response target from the moment a ticket opens; past it the ticket is "
        "overdue", area=TICKETS, check=lambda value: value > 0, rule="positive")

    similar_tickets_limit: int = integer(
        "SIMILAR_TICKETS_LIMIT", 3, "how many similar solved tickets `/similar` and the agent workspace show",
        area=TICKETS, low=1, high=20)
    similar_ticket_min_similarity: float = number(
        "SIMILAR_TICKET_MIN_SIMILARITY", 0.75, "a solved ticket at least this close (cosine) may ground an agent's "
        "draft (`bench/similar_recall.py`)", area=TICKETS, low=-1.0, high=1.0)

    notify_team_address: str | None = text(
        "NOTIFY_TEAM_ADDRESS", None, "where \"escalated and unassigned\" notifications go; unset = every agent "
        "with an e-mail who wants them", area=TICKETS, one_line=True, parse=_email_address)
    presence_seconds: int = integer(
        "PRESENCE_SECONDS", 30, "how long an agent's presence on a ticket (viewing / replying) lasts without a "
        "heartbeat; pages poll every quarter of it", area=TICKETS, low=5, high=3600)

    # Issue 36: how long customer data is kept; the background sweep enforces it in bounded batches.
    retention_raw_mail_days: int = integer(
        "RETENTION_RAW_MAIL_DAYS", 30, "received e-mail (raw bytes, kept for a retry) is deleted this many days "
        "after it arrived, once handled; 0 keeps it for ever", area=TICKETS, low=0)
    retention_solved_tickets_days: int | None = integer(
        "RETENTION_SOLVED_TICKETS_DAYS", None, "a solved ticket with no activity for this many days is erased "
        "(thread, attachments, mail; candidates an admin approved stay); unset keeps solved tickets for ever",
        area=TICKETS, low=1, default_text="unset (kept for ever)")
    article_trash_days: int = integer(
        "ARTICLE_TRASH_DAYS", 30, "a deleted article stays in the trash, restorable with its history, this many "
        "days; then the background sweep purges it", area=TICKETS, low=1)

    # ---- mail
    smtp_host: str | None = text("SMTP_HOST", None, "SMTP server; unset = no e-mail is queued or sent", area=MAIL)
    smtp_port: int = integer("SMTP_PORT", 25, "its port", area=MAIL, low=1, high=65535)
    smtp_username: str | None = text("SMTP_USERNAME", None, "login, when the server needs one", area=MAIL)
    smtp_password: str | None = text("SMTP_PASSWORD", None, "its password", area=MAIL, secret=True)
    smtp_starttls: bool = flag("SMTP_STARTTLS", False, "STARTTLS before login (kept as an alias of "
                               "`SMTP_TLS=starttls`)", area=MAIL)
    smtp_tls: str = text(
        "SMTP_TLS", "none", "`starttls` (port 587), `implicit` (port 465) or `none`; both TLS modes check the "
        "certificate and host name, and a failure is a retried failure, never a downgrade", area=MAIL,
        choices=("starttls", "implicit", "none"),
        derive=lambda v: "implicit" if v["smtp_port"] == 465 else "starttls" if v["smtp_starttls"] else "none",
        default_text="`implicit` on port 465, `starttls` with `SMTP_STARTTLS`, else `none`")
    smtp_ca_file: str | None = text("SMTP_CA_FILE", None, "PEM file of a private CA trusted for SMTP and IMAP "
                                    "TLS (besides the system's)", area=MAIL)
    mail_from: str = text("MAIL_FROM", "support@localhost", "the `From` of every e-mail (its domain names the "
                          "Message-IDs)", area=MAIL, one_line=True)
    mail_reply_to: str | None = text(
        "MAIL_REPLY_TO", None, "plus-address with `{token}`, e.g. `support+{token}@example.com`, so a reply finds "
        "its ticket", area=MAIL, one_line=True)
    inbound_email_secret: str | None = text(
        "INBOUND_EMAIL_SECRET", None, "HMAC key of `POST /api/inbound/email` (unset: the endpoint is off)",
        area=MAIL, secret=True)
    mail_max_attempts: int = integer(
        "MAIL_MAX_ATTEMPTS", 32, "attempts before an e-mail that keeps failing temporarily is failed (32 is about "
        "a day of backoff); a 5xx for the recipient fails it at once", area=MAIL, low=1, high=1000)
    mail_lease_seconds: int = integer(
        "MAIL_LEASE_SECONDS", 300, "how long a worker holds an e-mail while it talks SMTP (longer than an SMTP "
        "conversation)", area=MAIL, low=30, high=86400)
    mail_ack_per_address_per_hour: int = integer(
        "MAIL_ACK_PER_ADDRESS_PER_HOUR", 3, "acknowledgements to one address per hour (`0`: none at all)",
        area=MAIL, low=0)
    mail_ack_per_domain_per_hour: int = integer(
        "MAIL_ACK_PER_DOMAIN_PER_HOUR", 20, "acknowledgements to all the addresses of one domain per hour",
        area=MAIL, low=0)
    mail_ack_per_client_per_hour: int = integer(
        "MAIL_ACK_PER_CLIENT_PER_HOUR", 10, "acknowledgements that anonymous requests from one client address may "
        "cause per hour (the ticket is still stored)", area=MAIL, low=0)
    reply_attachment_max_bytes: int = integer(
        "REPLY_ATTACHMENT_MAX_BYTES", 5 * 1024 * 1024, "largest file on an agent's reply", area=MAIL, low=1)
    reply_attachments_max_bytes: int = integer(
        "REPLY_ATTACHMENTS_MAX_BYTES", 10 * 1024 * 1024, "all files on one reply together", area=MAIL, low=1)
    reply_attachments_max_files: int = integer("REPLY_ATTACHMENTS_MAX_FILES", 10, "files on one reply", area=MAIL,
                                               low=0)
    inbound_raw_max_bytes: int = integer(
        "INBOUND_RAW_MAX_BYTES", 10 * 1024 * 1024, "raw bytes of a received e-mail kept with it (the rest is cut; "
        "the message is still read in full)", area=MAIL, low=1024)
    inbound_attachment_max_bytes: int = integer(
        "INBOUND_ATTACHMENT_MAX_BYTES", 5 * 1024 * 1024, "largest inbound attachment kept (a larger one is left "
        "out and the message says so)", area=MAIL, low=0, high=2**31 - 1)
    inbound_message_attachments_max_bytes: int = integer(
        "INBOUND_MESSAGE_ATTACHMENTS_MAX_BYTES", 10 * 1024 * 1024, "all attachments of one inbound e-mail together",
        area=MAIL, low=0, high=2**31 - 1)
    # IMAP intake (docs/email-imap.md): implicit TLS on port 993, STARTTLS on any other port.
    imap_host: str | None = text("IMAP_HOST", None, "IMAP server the poller fetches support mail from; unset = no "
                                 "IMAP intake", area=MAIL)
    imap_port: int = integer("IMAP_PORT", 993, "its port: 993 is implicit TLS, any other port STARTTLS (with "
                             "`IMAP_TLS`)", area=MAIL, low=1, high=65535)
    imap_username: str | None = text("IMAP_USERNAME", None, "the mailbox's login", area=MAIL)
    imap_password: str | None = text("IMAP_PASSWORD", None, "its password (an app password on hosted mail)",
                                     area=MAIL, secret=True)
    imap_tls: bool = flag("IMAP_TLS", True, "TLS to the IMAP server, certificate and host name checked (off only "
                          "for a server on loopback)", area=MAIL)
    imap_folder: str = text("IMAP_FOLDER", "INBOX", "the folder read", area=MAIL)
    imap_processed_folder: str | None = text(
        "IMAP_PROCESSED_FOLDER", None, "taken messages are moved there; unset = they are flagged \\Seen instead",
        area=MAIL)
    imap_poll_seconds: float = number("IMAP_POLL_SECONDS", 60.0, "seconds between two passes over the folder",
                                      area=MAIL, low=1.0, high=86400.0)

    # ---- web
    host: str = text("SUPPORTRAG_HOST", "127.0.0.1", "address `serve` binds", area=WEB)
    port: int = integer("PORT", 5000, "port `serve` binds", area=WEB, low=0, high=65535)
    web_concurrency: int | None = integer(
        "WEB_CONCURRENCY", None, "gunicorn worker processes (`serve --workers`); each runs 4 threads and one "
        "BLAS/torch thread", area=WEB, low=1, default_text="one per core")
    public_url: str | None = text(
        "SUPPORTRAG_PUBLIC_URL", None, "the help center's address, for links in e-mails and drafts (never the "
        "request's host); required with `SMTP_HOST`", area=WEB, parse=_public_url,
        default_text="`http://SUPPORTRAG_HOST:PORT`")
    max_request_bytes: int = integer("SUPPORTRAG_MAX_REQUEST_BYTES", 1024 * 1024,
                                     "largest accepted request body (413 above)", area=WEB, low=1)
    secret_key: str | None = text(
        "SUPPORTRAG_SECRET_KEY", None, "key that signs the admin session cookie", area=WEB, secret=True,
        default_text="unset (a key generated once and kept in `app_state`)")
    public_search: bool = flag("SUPPORTRAG_PUBLIC_SEARCH", True,
                               "`0`: `POST /api/search` needs an admin token or login", area=WEB)
    public_tickets: bool = flag("SUPPORTRAG_PUBLIC_TICKETS", True,
                                "`0`: submitting tickets and feedback needs an admin token or login", area=WEB)
    secure_cookies: bool = flag("SUPPORTRAG_SECURE_COOKIES", False,
                                "mark the session cookie `Secure` (serve over HTTPS)", area=WEB)
    rate_limit_tickets: tuple[int, int] | None = rate(
        "SUPPORTRAG_RATE_LIMIT_TICKETS", "10/minute", "ticket submissions per client address (`COUNT/PERIOD`: "
        "`second`, `minute`, `hour`, `day`, `15minutes` or seconds; `off`); 429 + `Retry-After` above; admins are "
        "not limited", area=WEB)
    rate_limit_feedback: tuple[int, int] | None = rate(
        "SUPPORTRAG_RATE_LIMIT_FEEDBACK", "30/minute", "feedback posts per client address", area=WEB)
    rate_limit_login: tuple[int, int] | None = rate(
        "SUPPORTRAG_RATE_LIMIT_LOGIN", "10/minute", "login attempts per client address", area=WEB)
    login_lockout: tuple[int, int] | None = rate(
        "SUPPORTRAG_LOGIN_LOCKOUT", "5/15minutes", "failed logins for one (username, client address) after which "
        "that pair waits a window; each later failure doubles the wait (at most a day)", area=WEB)
    session_idle_seconds: int = integer(
        "SUPPORTRAG_SESSION_IDLE_SECONDS", 1800, "an admin session ends after this long without a request "
        "(at most `SUPPORTRAG_SESSION_LIFETIME_SECONDS`)", area=WEB, low=1)
    session_lifetime_seconds: int = integer(
        "SUPPORTRAG_SESSION_LIFETIME_SECONDS", 43200, "an admin session ends this long after the login, however "
        "busy", area=WEB, low=1)
    proxy_hops: int = integer(
        "SUPPORTRAG_PROXY_HOPS", 0, "reverse proxies in front of the service; the client address for limits is "
        "then taken from their `X-Forwarded-For`", area=WEB, low=0)
    brand_name: str | None = text(
        "SUPPORTRAG_BRAND_NAME", None, "the product's name customers see: the help center's header and title, the "
        "e-mails' sender name and signature", area=WEB, one_line=True, default_text="unset (\"supportrag help center\")")
    brand_color: str | None = text(
        "SUPPORTRAG_BRAND_COLOR", None, "accent colour of the help center (hex, e.g. `#1f6feb`)", area=WEB,
        parse=_brand_color)
    brand_logo: Path | None = text(
        "SUPPORTRAG_BRAND_LOGO", None, "path of a logo image (PNG, JPEG, GIF, WebP or SVG) shown in the help "
        "center's header", area=WEB, parse=lambda _name, raw: Path(raw).expanduser())
    # The embeddable chat widget (issue 35, service/widget).
    widget_allowed_origins: tuple[str, ...] = text(
        "WIDGET_ALLOWED_ORIGINS", (), "sites that may embed the chat widget, space- or comma-separated origins "
        "(`https://shop.example.com`); enforced by CSP `frame-ancestors` and on every `postMessage`", area=WEB,
        parse=_origins, default_text="unset (no other site may embed it)")
    widget_identity_secret: str | None = text(
        "WIDGET_IDENTITY_SECRET", None, "key of the widget's `user_hash` = HMAC-SHA256(key, user_id), computed "
        "by your own server", area=WEB, secret=True)
    widget_identity_required: bool = flag(
        "WIDGET_IDENTITY_REQUIRED", False, "`1`: only visitors with a valid `user_hash` may chat in the widget",
        area=WEB)
    widget_token_seconds: int = integer(
        "WIDGET_TOKEN_SECONDS", 7 * 86400, "how long a widget visitor's signed token (their way back to the "
        "conversation) stays valid", area=WEB, low=60)
    rate_limit_widget: tuple[int, int] | None = rate(
        "SUPPORTRAG_RATE_LIMIT_WIDGET", "30/minute", "widget questions and hand-offs per visitor and, "
        "separately, per client address", area=WEB)

    # ---- learning (the knowledge loop)
    importance_window_days: int = integer(
        "IMPORTANCE_WINDOW_DAYS", 30, "days of ticket outcomes an importance proposal reads", area=LEARNING, low=1,
        high=3650)
    importance_min_outcomes: int = integer(
        "IMPORTANCE_MIN_OUTCOMES", 5, "outcomes an article needs before a proposal is made", area=LEARNING, low=1)
    importance_max_step: float = number(
        "IMPORTANCE_MAX_STEP", 0.25, "the largest change one proposal makes to an importance", area=LEARNING,
        check=lambda value: 0 < value <= 2, rule="above 0 and at most 2")
    candidate_dedup_threshold: float = number(
        "CANDIDATE_DEDUP_THRESHOLD", 0.62, "cosine above which a candidate duplicates an existing article "
        "(tuned on the dev set: `bench/dedup_threshold.py`)", area=LEARNING, low=-1.0, high=1.0)
    candidate_also_asked_threshold: float = number(
        "CANDIDATE_ALSO_ASKED_THRESHOLD", 0.60, "cosine above which another ticket counts as \"also asked\" for a "
        "candidate (tuned likewise)", area=LEARNING, low=-1.0, high=1.0)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """Build settings from environment variables (``os.environ`` by default), then validate them."""
        values, _sources = read_environment(cls, os.environ if env is None else env)
        settings = cls(**values)
        settings.validate()
        return settings

    @classmethod
    def sources(cls, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Where each field's value comes from: ``environment``, ``derived`` (from other settings) or ``default``."""
        return read_environment(cls, os.environ if env is None else env)[1]

    def validate(self) -> None:
        """Refuse settings that would make scores, vectors or mail meaningless: each field's check, then pairs."""
        check_fields(self)
        if self.session_idle_seconds > self.session_lifetime_seconds:
            raise ConfigError("SUPPORTRAG_SESSION_IDLE_SECONDS must be at most SUPPORTRAG_SESSION_LIFETIME_SECONDS")
        if self.mail_reply_to is not None and self.mail_reply_to.count("{token}") != 1:
            raise ConfigError("MAIL_REPLY_TO must contain {token} once, e.g. support+{token}@example.com")
        if self.smtp_host and not self.public_url:  # links in e-mails must not come from a request's Host header
            raise ConfigError("SMTP_HOST needs SUPPORTRAG_PUBLIC_URL (the help center's address for e-mail links), "
                              "e.g. https://help.example.com")
        if self.imap_host and not (self.imap_username and self.imap_password):
            raise ConfigError("IMAP_HOST needs IMAP_USERNAME and IMAP_PASSWORD (an app password for hosted mail)")
        if self.imap_processed_folder is not None and self.imap_processed_folder == self.imap_folder:
            raise ConfigError("IMAP_PROCESSED_FOLDER must differ from IMAP_FOLDER")
        if self.reply_attachment_max_bytes > self.reply_attachments_max_bytes:
            raise ConfigError("REPLY_ATTACHMENT_MAX_BYTES must be at most REPLY_ATTACHMENTS_MAX_BYTES")
        if self.smtp_ca_file and not os.path.isfile(self.smtp_ca_file):
            raise ConfigError(f"SMTP_CA_FILE {self.smtp_ca_file!r} is not a file (a PEM file of the CA to trust)")
        if self.inbound_attachment_max_bytes > self.inbound_message_attachments_max_bytes:
            raise ConfigError("INBOUND_ATTACHMENT_MAX_BYTES must be at most INBOUND_MESSAGE_ATTACHMENTS_MAX_BYTES")

    @property
    def brand(self) -> Brand:
        """The brand customers see (the help center, e-mails and the chat widget read this one object)."""
        return Brand(name=self.brand_name, color=self.brand_color, logo=self.brand_logo)

    @property
    def model_cache_dir(self) -> Path:
        """Where the local model's exported ONNX graph is cached."""
        return self.model_dir or self.data_dir / "models"

    @property
    def embedded_pgdata(self) -> Path:
        """Data directory of the embedded PostgreSQL server."""
        return self.data_dir / "pgdata"
