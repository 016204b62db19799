"""BM25 statistics (migration 0014): per-term document frequency and the collection's totals.

Triggers on ``knowledge_base`` and ``knowledge_sections`` keep both true on every write; the units' own lengths
are generated columns of those tables (``bm25_length``). Read by service.retrieval.bm25.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

# A unit's vector: the card's is knowledge_base.search_vector; a text section's is generated from this.
# ``bm25_text_vector``: Snowball English stems less Lucene's 33 stop words (migration 0025).
SECTION_SEARCH_VECTOR = ("CASE WHEN kind = 'text' THEN bm25_text_vector(bm25_heading_text(heading_path) || ' ' || "
                         "content) END")
CARD_SEARCH_VECTOR = ("setweight(bm25_text_vector(coalesce(title, '')), 'A') || "
                      "setweight(bm25_text_vector(coalesce(content, '')), 'B')")


def unit_length_column(vector_sql: str) -> Mapped[int | None]:
    """A unit's length in terms: how many positions its tsvector holds (generated)."""
    return mapped_column(sa.Integer, sa.Computed(f"bm25_term_count({vector_sql})", persisted=True), nullable=True)


def section_search_vector_column() -> Mapped[object | None]:
    """A text section's tsvector (heading path + text); NULL for heading-only sections, which are not units."""
    return mapped_column(TSVECTOR, sa.Computed(SECTION_SEARCH_VECTOR, persisted=True), nullable=True, deferred=True)


class Bm25Term(Base):
    """How many units (cards and text sections) contain a lexeme; lexemes no unit has are not stored."""

    __tablename__ = "bm25_terms"

    term: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    df: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


class Bm25Totals(Base):
    """The one row of collection totals: N (units) and their summed length (avgdl = total_length / units)."""

    __tablename__ = "bm25_totals"

    id: Mapped[int] = mapped_column(sa.SmallInteger, primary_key=True)
    units: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    total_length: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)

    __table_args__ = (sa.CheckConstraint("id = 1", name="bm25_totals_one_row"),)
