"""Embedding articles through their sections: split, reuse stored vectors by hash, embed the rest, store.

Every path that embeds (add, update, import, seed, reembed, evaluation) comes through ``index_articles``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Article, ArticleSection
from service.knowledge.clusters import assign_clusters
from service.knowledge.sections import SectionDraft, card_embedding_text, section_embedding_text, split_sections
from service.providers.embeddings import (
    Embedder,
    EmbeddingError,
    embed_padded,
    input_window,
    text_sha256,
    token_counter,
)

log = logging.getLogger(__name__)

# Vectors already stored for these articles with the active model, by the hash of the text they embed.
STORED_VECTORS_SQL = sa.text("""
SELECT article_id, content_sha256, embedding FROM knowledge_sections
WHERE article_id = ANY(:ids) AND embedding IS NOT NULL AND embedding_model = :model
UNION ALL
SELECT id, content_sha256, embedding FROM knowledge_base
WHERE id = ANY(:ids) AND embedding IS NOT NULL AND embedding_model = :model AND content_sha256 IS NOT NULL
""").columns(sa.column("article_id", sa.BigInteger), sa.column("content_sha256", sa.Text),
             sa.column("embedding", Article.embedding.type))

# Sections go in with COPY … FORMAT BINARY: vectors travel as pgvector's binary, no per-row statement.
SECTION_COLUMNS = ("article_id", "ordinal", "heading_path", "content", "char_start", "char_end", "kind",
                   "content_sha256", "embedding", "embedding_model", "cluster_id")
SECTION_TYPES = ("int8", "int4", "text[]", "text", "int4", "int4", "text", "text", "vector", "text", "int4")
COPY_SECTIONS_SQL = f"COPY knowledge_sections ({', '.join(SECTION_COLUMNS)}) FROM STDIN WITH (FORMAT BINARY)"

UPDATE_CARD_SQL = sa.text("""
UPDATE knowledge_base SET embedding = :embedding, embedding_model = :model, content_sha256 = :sha256,
                          cluster_id = :cluster_id
WHERE id = :id
""").bindparams(sa.bindparam("embedding", type_=Article.embedding.type))


@dataclass(frozen=True)
class IndexInput:
    """What is needed to index one article."""

    id: int
    title: str
    content: str


@dataclass(frozen=True)
class _Planned:
    """One article's texts to embed: its card and its sections."""

    article: IndexInput
    drafts: list[SectionDraft]
    card_text: str
    section_texts: list[str]


def plan_sections(embedder: Embedder, title: str, content: str) -> list[SectionDraft]:
    """The article's sections for this embedder's input window."""
    return split_sections(title, content, window_tokens=input_window(embedder), count_tokens=token_counter(embedder))


def _plan(embedder: Embedder, article: IndexInput) -> _Planned:
    drafts = plan_sections(embedder, article.title, article.content)
    texts = [section_embedding_text(article.title, d.heading_path, d.text, d.kind) for d in drafts]
    return _Planned(article, drafts, card_embedding_text(article.title, drafts), texts)


def _stored_vectors(session: Session, ids: list[int], model: str) -> dict[str, np.ndarray]:
    """Stored vectors by text hash (same text, same model: the same vector, whichever row holds it)."""
    rows = session.execute(STORED_VECTORS_SQL, {"ids": ids, "model": model})
    return {row.content_sha256: row.embedding for row in rows}


def _embed_missing(embedder: Embedder, texts: Sequence[str], known: dict[str, np.ndarray]) -> str | None:
    """Embed the texts whose hash has no vector yet, in one provider call; returns the error if it failed."""
    missing = {text_sha256(text): text for text in texts if text_sha256(text) not in known}
    if not missing:
        return None
    try:
        vectors = embed_padded(embedder, list(missing.values()))
    except EmbeddingError as exc:
        log.warning("embedding failed for %d texts, left pending: %s", len(missing), exc)
        return str(exc)
    known.update(zip(missing, vectors))
    return None


def _section_rows(plan: _Planned, known: dict[str, np.ndarray], model: str) -> list[dict[str, Any]]:
    rows = []
    for draft, text in zip(plan.drafts, plan.section_texts):
        digest = text_sha256(text)
        vector = known.get(digest)
        rows.append({"article_id": plan.article.id, "ordinal": draft.ordinal, "heading_path": list(draft.heading_path),
                     "content": draft.text, "char_start": draft.start, "char_end": draft.end, "kind": draft.kind,
                     "content_sha256": digest, "embedding": vector,
                     "embedding_model": model if vector is not None else None})
    return rows


def index_articles(session: Session, embedder: Embedder, articles: Sequence[IndexInput]) -> str | None:
    """(Re)build the sections and vectors of stored articles; returns the provider's error, if any.

    Unchanged texts keep their stored vectors; the rest are embedded in one provider call. If the
    provider fails, what could not be embedded is stored without a vector (pending), nothing is lost.
    """
    if not articles:
        return None
    model = embedder.model_name
    plans = [_plan(embedder, article) for article in articles]
    known = _stored_vectors(session, [a.id for a in articles], model)
    error = _embed_missing(embedder, [t for p in plans for t in (p.card_text, *p.section_texts)], known)
    ids = [plan.article.id for plan in plans]
    session.execute(sa.delete(ArticleSection).where(ArticleSection.article_id.in_(ids)))
    section_rows = [row for plan in plans for row in _section_rows(plan, known, model)]
    cards = []
    for plan in plans:
        vector = known.get(text_sha256(plan.card_text))
        cards.append({"id": plan.article.id, "embedding": vector, "model": model if vector is not None else None,
                      "sha256": text_sha256(plan.card_text) if vector is not None else None})
    # Each new vector joins its nearest cluster now, so the exact walk bounds it without a re-training.
    clusters = assign_clusters(session, model, [r["embedding"] for r in section_rows] + [c["embedding"] for c in cards])
    for row, cluster_id in zip([*section_rows, *cards], clusters):
        row["cluster_id"] = cluster_id
    copy_sections(session, section_rows)
    session.execute(UPDATE_CARD_SQL, cards)
    _expire_cards(session, set(ids))
    return error


def copy_sections(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Write section rows with binary COPY on the session's connection (inside its transaction)."""
    if not rows:
        return
    driver_connection = session.connection().connection.driver_connection
    with driver_connection.cursor() as cursor, cursor.copy(COPY_SECTIONS_SQL) as copy:
        copy.set_types(list(SECTION_TYPES))
        for row in rows:
            copy.write_row([row.get(column) for column in SECTION_COLUMNS])


def _expire_cards(session: Session, ids: set[int]) -> None:
    """Loaded Article objects must not keep the vectors this module just wrote with plain SQL."""
    for obj in list(session.identity_map.values()):
        if isinstance(obj, Article) and obj.id in ids:
            session.expire(obj, ["embedding", "embedding_model", "content_sha256", "cluster_id"])


@dataclass(frozen=True)
class SectionView:
    """A stored section as the admin sees it: where it is and whether its vector is current."""

    ordinal: int
    kind: str
    heading_path: tuple[str, ...]
    char_start: int
    char_end: int
    words: int
    embedding_status: str  # "embedded" | "pending" | "stale"


def list_sections(session: Session, article_id: int, active_model: str) -> list[SectionView]:
    """An article's sections in order, with the state of each one's vector."""
    rows = session.execute(sa.select(
        ArticleSection.ordinal, ArticleSection.kind, ArticleSection.heading_path, ArticleSection.char_start,
        ArticleSection.char_end, ArticleSection.content, ArticleSection.embedding_model,
        ArticleSection.embedding.is_not(None).label("has_embedding"),
    ).where(ArticleSection.article_id == article_id).order_by(ArticleSection.ordinal))
    return [SectionView(ordinal=r.ordinal, kind=r.kind, heading_path=tuple(r.heading_path), char_start=r.char_start,
                        char_end=r.char_end, words=len(r.content.split()),
                        embedding_status="pending" if not r.has_embedding
                        else "embedded" if r.embedding_model == active_model else "stale")
            for r in rows]
