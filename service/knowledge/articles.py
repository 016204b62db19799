"""Knowledge-base use cases: add, read, change, delete, re-embed. They never commit."""

from __future__ import annotations

import logging
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from service.db.models import Article, ArticleSection
from service.db.statistics import ANALYZE_BASE_ROWS, refresh_statistics
from service.knowledge.audit import ImportanceCause, record_importance_change
from service.knowledge.indexing import IndexInput, index_articles, write_batch
from service.knowledge.pipeline import embed_ahead
from service.knowledge.versions import ChangeContext, VersionConflict, get_version, set_change_context, \
    version_fields
from service.providers.embeddings import Embedder, EmbeddingError
from service.validation import clean_article_fields

log = logging.getLogger(__name__)


class ArticleNotFound(LookupError):
    """No article with that id."""


BIGINT_MAX = 2**63 - 1


@dataclass(frozen=True)
class ArticleSource:
    """Where an imported article came from (a file path, or file#line) and the hash of its bytes."""

    path: str
    sha256: str


def _check_id(article_id: int) -> None:
    """Ids outside bigint's range cannot exist; say so instead of letting PostgreSQL overflow."""
    if not 1 <= article_id <= BIGINT_MAX:
        raise ArticleNotFound(article_id)


@dataclass(frozen=True)
class StoredArticle:
    """An article as stored, with the state of its embedding."""

    id: int
    title: str
    content: str
    category: str | None
    importance: float
    created_at: datetime
    updated_at: datetime
    embedding_model: str | None
    embedding_status: str  # "embedded" | "pending" | "stale"
    embedding_error: str | None = None
    version: int = 1  # the newest version's number (service.knowledge.versions): send it back to edit

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (ISO timestamps)."""
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        data["updated_at"] = self.updated_at.isoformat()
        return data


def embedding_status(has_embedding: bool, row_model: str | None, active_model: str) -> str:
    """``pending`` without a vector, ``stale`` when another model made it, else ``embedded``."""
    if not has_embedding:
        return "pending"
    return "embedded" if row_model == active_model else "stale"


def _has_embedding_column():
    """True when the article's own vector and every section's vector are stored (of whichever model)."""
    section_pending = sa.exists().where(ArticleSection.article_id == Article.id, ArticleSection.embedding.is_(None))
    return sa.and_(Article.embedding.is_not(None), ~section_pending).label("has_embedding")


def _to_stored(article: Article, has_embedding: bool, active_model: str,
               error: str | None = None) -> StoredArticle:
    return StoredArticle(
        id=article.id, title=article.title, content=article.content, category=article.category,
        importance=article.importance, created_at=article.created_at, updated_at=article.updated_at,
        embedding_model=article.embedding_model,
        embedding_status=embedding_status(has_embedding, article.embedding_model, active_model),
        embedding_error=error, version=article.version,
    )


def _index(session: Session, article: Article, embedder: Embedder) -> str | None:
    """Embed the flushed article through its sections; on provider failure what is missing stays pending."""
    return index_articles(session, embedder, [IndexInput(article.id, article.title, article.content)])


def add_article(session: Session, embedder: Embedder, fields: dict[str, Any], *,
                source: ArticleSource | None = None, change: ChangeContext | None = None) -> StoredArticle:
    """Validate, embed and insert an article; an embedder failure stores it as pending.

    Its first version is written by the database, with ``change``'s author and source.
    """
    cleaned = clean_article_fields(fields)
    if change is not None:
        set_change_context(session, change)
    article = Article(**cleaned)
    if source is not None:
        article.source_path, article.source_sha256 = source.path, source.sha256
    session.add(article)
    session.flush()
    error = _index(session, article, embedder)
    session.refresh(article, ["created_at", "updated_at", "version", "category"])  # category: the stored spelling (0032)
    return _to_stored(article, article.content_sha256 is not None and error is None, embedder.model_name, error)


def get_article(session: Session, article_id: int, active_model: str) -> StoredArticle:
    """One article by id, or ArticleNotFound."""
    _check_id(article_id)
    row = session.execute(
        sa.select(Article, _has_embedding_column()).where(Article.id == article_id)
    ).one_or_none()
    if row is None:
        raise ArticleNotFound(article_id)
    return _to_stored(row[0], row[1], active_model)


def update_article(session: Session, embedder: Embedder, article_id: int,
                   fields: dict[str, Any], *, source: ArticleSource | None = None,
                   cause: ImportanceCause | None = None, change: ChangeContext | None = None,
                   expected_version: int | None = None) -> StoredArticle:
    """Apply a partial change; text that changed (by hash) is re-embedded, importance alone is not.

    A change of importance is written to the audit log with ``cause`` (default: the API, no actor); any change
    makes a version with ``change``'s author and source. ``expected_version`` is the optimistic lock: the version
    the editor started from, else VersionConflict (nothing is written).
    """
    _check_id(article_id)
    cleaned = clean_article_fields(fields, partial=True)
    article = session.get(Article, article_id, with_for_update=True, populate_existing=True)
    if article is None:
        raise ArticleNotFound(article_id)
    if expected_version is not None and article.version != expected_version:
        raise VersionConflict(article_id, expected_version, article.version)
    if change is not None:
        set_change_context(session, change)
    if "importance" in cleaned:
        record_importance_change(session, article_id, article.importance, cleaned["importance"],
                                 cause or ImportanceCause())
    for name, value in cleaned.items():
        setattr(article, name, value)
    if source is not None:
        article.source_path, article.source_sha256 = source.path, source.sha256
    text_changed = any(name in cleaned for name in ("title", "content"))
    session.flush()
    error = None
    if text_changed or _needs_embedding(session, article.id, embedder.model_name):
        error = _index(session, article, embedder)  # unchanged sections keep their vectors (by hash)
    if cleaned:
        article.updated_at = sa.func.clock_timestamp()  # now() is the transaction's start
    session.flush()
    session.refresh(article, ["updated_at", "version", "category"])  # category: the stored spelling (0032)
    # The article's own vector may be kept (unchanged text) while a section failed: ask the rows, as reads do.
    has_embedding = session.scalar(sa.select(_has_embedding_column()).where(Article.id == article.id))
    return _to_stored(article, bool(has_embedding), embedder.model_name, error)


def restore_article_version(session: Session, embedder: Embedder, article_id: int, number: int, *,
                            author: str, cause: ImportanceCause | None = None) -> StoredArticle:
    """Write version ``number`` back as a new version (re-embedded at once, so search follows)."""
    _check_id(article_id)
    if session.get(Article, article_id) is None:
        raise ArticleNotFound(article_id)
    version = get_version(session, article_id, number)
    return update_article(session, embedder, article_id, version_fields(version), cause=cause,
                          change=ChangeContext(author, "restore"))


def delete_article(session: Session, article_id: int, *, change: ChangeContext | None = None) -> None:
    """Delete an article (a trigger moves it to the trash with its history), or ArticleNotFound."""
    _check_id(article_id)
    if change is not None:
        set_change_context(session, change)
    deleted = session.execute(sa.delete(Article).where(Article.id == article_id)).rowcount
    if not deleted:
        raise ArticleNotFound(article_id)


def list_articles(session: Session, active_model: str, *, page: int = 1, per_page: int = 20,
                  category: str | None = None, contains: str | None = None) -> tuple[list[StoredArticle], int]:
    """A page of articles, newest first, and the total count; ``contains`` matches title or content."""
    where = [sa.func.lower(Article.category) == category.lower()] if category else []
    if contains:
        pattern = "%" + contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append(sa.or_(Article.title.ilike(pattern, escape="\\"), Article.content.ilike(pattern, escape="\\")))
    total = session.execute(sa.select(sa.func.count()).select_from(Article).where(*where)).scalar_one()
    rows = session.execute(
        sa.select(Article, _has_embedding_column()).where(*where)
        .order_by(Article.created_at.desc(), Article.id.desc())
        .offset((page - 1) * per_page).limit(per_page)
    ).all()
    return [_to_stored(article, has, active_model) for article, has in rows], total


STATS_SQL = sa.text("""
SELECT count(*) AS articles,
       count(*) FILTER (WHERE embedding IS NOT NULL AND embedding_model = :model) AS embedded,
       count(*) FILTER (WHERE embedding IS NULL) AS pending,
       count(*) FILTER (WHERE embedding IS NOT NULL AND embedding_model IS DISTINCT FROM :model) AS stale
FROM knowledge_base
""")

SECTION_STATS_SQL = sa.text("""
SELECT count(*) AS total,
       count(*) FILTER (WHERE embedding IS NOT NULL AND embedding_model = :model) AS embedded,
       count(*) FILTER (WHERE embedding IS NULL) AS pending
FROM knowledge_sections
""")

# The approximate mode's graph index on the sections' half-precision vectors, if one was built
# (`supportrag db hnsw`, on search_vectors); exact search reads no index.
INDEX_SQL = sa.text("""
SELECT indexname, indexdef FROM pg_indexes
WHERE tablename = 'search_vectors' AND indexdef LIKE '%USING hnsw%' AND indexdef LIKE '%section_id IS NOT NULL%'
  AND schemaname = current_schema()
ORDER BY indexname LIMIT 1
""")


def knowledge_stats(session: Session, active_model: str) -> dict[str, Any]:
    """Counts of articles by embedding state, the active model and the vector index."""
    counts = dict(session.execute(STATS_SQL, {"model": active_model}).mappings().one())
    index = session.execute(INDEX_SQL).mappings().one_or_none()
    counts["sections"] = dict(session.execute(SECTION_STATS_SQL, {"model": active_model}).mappings().one())
    counts["model"] = active_model
    counts["index"] = {"name": index["indexname"], "definition": index["indexdef"]} if index else None
    return counts


# An article needs (re-)embedding when its own vector or any section's is missing or from another model,
# or when it has no sections yet (a database from before sections: `supportrag db upgrade`, then `reembed`).
NEEDS_EMBEDDING = sa.or_(
    Article.embedding.is_(None),
    Article.embedding_model.is_distinct_from(sa.bindparam("active_model")),
    ~sa.exists().where(ArticleSection.article_id == Article.id),
    sa.exists().where(ArticleSection.article_id == Article.id, sa.or_(
        ArticleSection.embedding.is_(None),
        ArticleSection.embedding_model.is_distinct_from(sa.bindparam("active_model")))),
)


def _needs_embedding(session: Session, article_id: int, active_model: str) -> bool:
    """Whether this article's vectors are incomplete or stale."""
    return session.execute(sa.select(sa.exists().where(Article.id == article_id, NEEDS_EMBEDDING)),
                           {"active_model": active_model}).scalar_one()


def articles_needing_embedding(session: Session, active_model: str, *, limit: int) -> list[Article]:
    """Articles whose vectors are incomplete or stale, oldest id first, locked for update."""
    return list(session.scalars(
        sa.select(Article).where(NEEDS_EMBEDDING).order_by(Article.id).limit(limit)
        .with_for_update(skip_locked=True), {"active_model": active_model}
    ))


def count_needing_embedding(session: Session, active_model: str) -> int:
    """How many articles ``reembed`` would touch."""
    return session.execute(sa.select(sa.func.count()).select_from(Article).where(NEEDS_EMBEDDING),
                           {"active_model": active_model}).scalar_one()


def reembed_batch(session: Session, embedder: Embedder, *, batch_size: int = 64,
                  on_progress: Callable[[int], None] | None = None) -> int:
    """Embed one batch of articles needing it (unchanged sections keep their vectors); returns how many."""
    articles = articles_needing_embedding(session, embedder.model_name, limit=batch_size)
    if not articles:
        return 0
    error = index_articles(session, embedder, [IndexInput(a.id, a.title, a.content) for a in articles])
    if error:  # abort the batch (the caller rolls back); nothing is lost
        raise EmbeddingError(error)
    if on_progress:
        on_progress(len(articles))
    return len(articles)


def refresh_reembedded_statistics(session: Session, articles: int) -> None:
    """After a re-embed of ``articles`` articles (committed batch by batch), ANALYZE the tables it moved: each
    article's row, and at least one section and two vectors (card and section) each, rewritten (a lower bound,
    so it never analyzes more than the rows call for)."""
    analyzed = refresh_statistics(session, {"knowledge_base": articles, "knowledge_sections": articles,
                                            "search_vectors": 2 * articles})
    if analyzed:
        log.info("analyzed %s after re-embedding %d articles", ", ".join(analyzed), articles)


def bulk_add_articles(session: Session, embedder: Embedder, items: list[dict[str, Any]], *,
                      batch_size: int = 256,
                      on_progress: Callable[[int], None] | None = None,
                      sources: list[ArticleSource] | None = None,
                      change: ChangeContext | None = None) -> list[int]:
    """Validate, embed in batches and insert many articles; returns their ids in input order.

    The next batches are embedded while this one is written (service.knowledge.pipeline). A provider failure
    stores the batch as pending rather than losing it. ``sources``, if given, has one entry per item.
    """
    if sources is not None and len(sources) != len(items):
        raise ValueError(f"{len(sources)} sources for {len(items)} articles")
    batches = []
    for start in range(0, len(items), batch_size):  # everything validated before anything is embedded
        batch = [clean_article_fields(item) for item in items[start:start + batch_size]]
        if sources is not None:
            batch = [{**fields, "source_path": source.path, "source_sha256": source.sha256}
                     for fields, source in zip(batch, sources[start:start + batch_size])]
        batches.append(batch)
    inputs = [[IndexInput(0, a["title"], a["content"]) for a in batch] for batch in batches]
    if change is not None:
        set_change_context(session, change)
    ids: list[int] = []
    with closing(embed_ahead(embedder, inputs)) as embedded_batches:
        for batch, embedded in zip(batches, embedded_batches):
            new_ids = list(session.scalars(
                sa.insert(Article).returning(Article.id, sort_by_parameter_order=True), batch))
            write_batch(session, embedded, new_ids)
            ids.extend(new_ids)
            if on_progress:
                on_progress(len(batch))
    refresh_article_statistics(session, ids)
    return ids


def refresh_article_statistics(session: Session, ids: list[int]) -> None:
    """ANALYZE the tables a bulk write of these articles (added, or updated: autovacuum counts both) moved past
    autovacuum's threshold, before anyone searches them."""
    if len(ids) <= ANALYZE_BASE_ROWS:  # below the threshold whatever the table holds: skip the count
        return
    sections = session.scalar(sa.select(sa.func.count()).select_from(ArticleSection).where(
        ArticleSection.article_id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.BigInteger)))))
    analyzed = refresh_statistics(session, {"knowledge_base": len(ids), "knowledge_sections": sections,
                                            "search_vectors": sections + len(ids)})
    if analyzed:
        log.info("analyzed %s after writing %d articles", ", ".join(analyzed), len(ids))
