"""The declarative base, column types shared by every aggregate, and small app-wide tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def length_between(column: str, low: int, high: int) -> sa.ColumnElement[bool]:
    """``char_length(column) BETWEEN low AND high`` for a CHECK constraint (rendered as literals in DDL)."""
    return sa.func.char_length(sa.column(column)).between(low, high)


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


class AppState(Base):
    """Small key/value facts about this database (e.g. when it was seeded)."""

    __tablename__ = "app_state"

    key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    value: Mapped[str] = mapped_column(sa.Text, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


