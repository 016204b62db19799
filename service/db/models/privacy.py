"""Article versions and the privacy log (migration 0031); versions are written by triggers on knowledge_base."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

PRIVACY_EVENT_KINDS = ("erase", "retention_raw_mail", "retention_tickets", "trash_purge")


class ArticleVersion(Base):
    """One saved state of an article: its text, category, importance, who made it and through what."""

    __tablename__ = "article_versions"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    article_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)  # no foreign key: outlives a delete
    number: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content: Mapped[str] = mapped_column(sa.Text, nullable=False)
    category: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    author: Mapped[str] = mapped_column(sa.Text, nullable=False)
    source: Mapped[str] = mapped_column(sa.Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.text("clock_timestamp()"))

    __table_args__ = (sa.UniqueConstraint("article_id", "number", name="article_versions_article_number"),)


class ArticleTrash(Base):
    """A deleted article, copied here by a trigger; restorable with its history until the worker purges it."""

    __tablename__ = "article_trash"

    id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content: Mapped[str] = mapped_column(sa.Text, nullable=False)
    category: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False)
    version: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    source_path: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    source_sha256: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    deleted_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.text("clock_timestamp()"))
    deleted_by: Mapped[str] = mapped_column(sa.Text, nullable=False)

    __table_args__ = (sa.Index("article_trash_deleted", "deleted_at"),)


class ArticleDraft(Base):
    """A draft outside knowledge_base (so nothing customers see reads it): a new article, or an edit of one."""

    __tablename__ = "article_drafts"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    article_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("knowledge_base.id", ondelete="CASCADE"), nullable=True)
    base_version: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)  # the version the edit started from
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content: Mapped[str] = mapped_column(sa.Text, nullable=False)
    category: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False, server_default="1.0")
    author: Mapped[str] = mapped_column(sa.Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())

    __table_args__ = (sa.Index("article_drafts_article", "article_id"),)


class PrivacyEvent(Base):
    """An erasure or retention run: when, by whom, how many rows of each kind; never the address."""

    __tablename__ = "privacy_events"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.Text, nullable=False)
    actor: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    counts: Mapped[dict] = mapped_column(JSONB, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())

    __table_args__ = (
        sa.CheckConstraint(sa.column("kind").in_(PRIVACY_EVENT_KINDS), name="privacy_events_kind_valid"),
        sa.Index("privacy_events_created", "created_at"),
    )
