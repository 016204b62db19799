"""First-run seeding of the default help-center articles, exactly once per database."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import AppState, Article
from service.knowledge.articles import add_article, delete_article
from service.knowledge.versions import ChangeContext
from service.knowledge.markdown import parse_front_matter
from service.providers.embeddings import Embedder

log = logging.getLogger(__name__)

SEEDS_DIR = Path(__file__).resolve().parents[2] / "seeds" / "articles"
SEEDED_KEY = "seeded_at"
SEED_LOCK_KEY = 7_331_002


def load_seed_articles(seeds_dir: Path = SEEDS_DIR) -> list[dict]:
    """The seed files as article fields, in file-name order."""
    articles = []
    for path in sorted(seeds_dir.glob("*.md")):
        doc = parse_front_matter(path.read_text(encoding="utf-8"))
        articles.append({
            "title": doc.meta.get("title") or path.stem,
            "content": doc.body,
            "category": doc.meta.get("category"),
            "importance": float(doc.meta.get("importance", 1.0)),
        })
    return articles


def is_seeded(session: Session) -> bool:
    """Whether this database was ever seeded (deleted seed articles stay deleted)."""
    return session.get(AppState, SEEDED_KEY) is not None


def seed_knowledge_base(session: Session, embedder: Embedder, seeds_dir: Path = SEEDS_DIR) -> int:
    """Insert the seed articles unless already done; returns how many were inserted.

    Safe when several processes start at once: a transaction-scoped advisory lock
    serialises them and the marker row is checked again under the lock. The
    caller commits, which also releases the lock.
    """
    if is_seeded(session):
        return 0
    session.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SEED_LOCK_KEY})
    # Another process may have seeded while we waited; a fresh snapshot shows it.
    session.expire_all()
    if session.execute(sa.select(AppState.key).where(AppState.key == SEEDED_KEY)).first():
        return 0
    articles = load_seed_articles(seeds_dir)
    for fields in articles:
        add_article(session, embedder, fields, change=ChangeContext("system", "seed"))
    session.add(AppState(key=SEEDED_KEY, value=datetime.now(timezone.utc).isoformat()))
    session.flush()
    log.info("seeded %d default articles", len(articles))
    return len(articles)


def seeded_at(session: Session) -> str | None:
    """When the default articles were seeded (ISO time), None if never."""
    row = session.get(AppState, SEEDED_KEY)
    return row.value if row is not None else None


def remove_seed_articles(session: Session, seeds_dir: Path = SEEDS_DIR) -> int:
    """Delete the default articles still as seeded (same title and text; an edited one is kept); how many.

    The seeded marker stays, so they never come back on the next start.
    """
    seeds = {(a["title"], a["content"]) for a in load_seed_articles(seeds_dir)}
    rows = session.execute(sa.select(Article.id, Article.title, Article.content)
                           .where(Article.title.in_([title for title, _ in seeds]))).all()
    removed = [row.id for row in rows if (row.title, row.content) in seeds]
    for article_id in removed:
        delete_article(session, article_id)
    return len(removed)
