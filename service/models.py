"""Tables, declared once; migrations/ creates the same schema (a test compares them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .config import VECTOR_DIMENSIONS

TITLE_MAX = 300
CONTENT_MAX = 100_000
CATEGORY_MAX = 64
IMPORTANCE_MIN = 0.0
IMPORTANCE_MAX = 2.0


class BinaryVector(VECTOR):
    """pgvector's column type, but binds numpy arrays as they are.

    psycopg then sends them with pgvector's binary dumper (registered on every
    connection) instead of formatting 1536 floats as text.
    """

    cache_ok = True

    def bind_processor(self, dialect: sa.Dialect) -> Any:
        def process(value: Any) -> Any:
            if value is None:
                return None
            return np.asarray(value, dtype=np.float32)

        return process

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        def process(value: Any) -> Any:
            if value is None or isinstance(value, np.ndarray):
                return value
            return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)

        return process


class Base(DeclarativeBase):
    """Declarative base of all tables."""


class Article(Base):
    """A knowledge-base article and its embedding."""

    __tablename__ = "knowledge_base"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    title: Mapped[str] = mapped_column(sa.Text, nullable=False)
    content: Mapped[str] = mapped_column(sa.Text, nullable=False)
    category: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    embedding: Mapped[Any | None] = mapped_column(BinaryVector(VECTOR_DIMENSIONS), nullable=True, deferred=True)
    importance: Mapped[float] = mapped_column(sa.Double, nullable=False, server_default=sa.text("1.0"))
    created_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
    embedding_model: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    content_sha256: Mapped[str | None] = mapped_column(sa.Text, nullable=True)

    __table_args__ = (
        sa.CheckConstraint(
            f"importance >= {IMPORTANCE_MIN} AND importance <= {IMPORTANCE_MAX}",
            name="knowledge_base_importance_range",
        ),
        sa.CheckConstraint(
            f"char_length(title) BETWEEN 1 AND {TITLE_MAX}", name="knowledge_base_title_length"
        ),
        sa.CheckConstraint(
            f"char_length(content) BETWEEN 1 AND {CONTENT_MAX}", name="knowledge_base_content_length"
        ),
        sa.CheckConstraint(
            f"category IS NULL OR char_length(category) <= {CATEGORY_MAX}",
            name="knowledge_base_category_length",
        ),
        # HNSW with the operator class that matches the <=> (cosine distance) queries.
        sa.Index(
            "knowledge_base_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        sa.Index("knowledge_base_embedding_model", "embedding_model"),
    )


class AppState(Base):
    """Small key/value facts about this database (e.g. when it was seeded)."""

    __tablename__ = "app_state"

    key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    value: Mapped[str] = mapped_column(sa.Text, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )
