"""The full-text leg's query side: synonym variants and the AND/OR tsqueries. SQL runs in PostgreSQL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import SynonymGroup
from service.validation import ValidationError

MAX_VARIANTS = 12
# Distinct words a query keeps for the full-text leg. PostgreSQL evaluates a tsquery recursively, so 2,000 words ×
# 12 variants ran past its stack depth; past a few dozen words, more AND terms only ever match nothing.
MAX_QUERY_TERMS = 64
_WORD = re.compile(r"[\w'-]+")


@dataclass(frozen=True)
class LexicalQuery:
    """The tsqueries for one search and what they were built from."""

    and_query: str | None  # every word (or a synonym of it) must match
    or_query: str | None  # any word may match; the fallback when AND finds too little
    lexemes: list[str]  # stemmed words of the query and its synonym variants
    synonyms_used: list[str]  # the synonyms that were added


def _term_pattern(term: str) -> re.Pattern:
    words = r"\s+".join(re.escape(word) for word in term.lower().split())
    return re.compile(rf"(?<![\w-]){words}(?![\w-])", re.IGNORECASE)


def synonym_variants(query: str, groups: Sequence[Sequence[str]]) -> tuple[list[str], list[str]]:
    """The query plus one variant per synonym of each group term it contains.

    Each variant replaces a single matched term, so the count grows with the
    number of synonyms, never combinatorially; longer terms are matched first
    ("money back" before "back").
    """
    variants = [query]
    added: list[str] = []
    for group in groups:
        for term in sorted(group, key=len, reverse=True):
            pattern = _term_pattern(term)
            if not pattern.search(query):
                continue
            for alternative in group:
                if alternative.lower() == term.lower() or len(variants) >= MAX_VARIANTS:
                    continue
                variants.append(pattern.sub(alternative, query))
                added.append(alternative)
            break  # one matched term per group is enough
    return variants, added


def capped_terms(query: str, max_terms: int = MAX_QUERY_TERMS) -> str:
    """``query`` itself when it has at most ``max_terms`` words; else its first ``max_terms`` distinct words
    (compared case-insensitively, in order), so no query builds a tsquery deeper than the cap."""
    words = _WORD.findall(query)
    if len(words) <= max_terms:
        return query
    kept: dict[str, str] = {}
    for word in words:
        kept.setdefault(word.lower(), word)
        if len(kept) == max_terms:
            break
    return " ".join(kept.values())


def load_synonym_groups(session: Session) -> list[list[str]]:
    """Every synonym group, in id order."""
    return [list(terms) for terms in session.scalars(sa.select(SynonymGroup.terms).order_by(SynonymGroup.id))]


# Built in PostgreSQL so stemming and stop words are exactly those of the 'english' configuration.
RESOLVE_TSQUERY_SQL = sa.text("""
WITH variants AS (
    SELECT websearch_to_tsquery('english', v) AS q FROM unnest(CAST(:variants AS text[])) AS v
)
SELECT
    (SELECT string_agg('(' || q::text || ')', ' | ') FROM variants WHERE q::text <> '') AS and_query,
    NULLIF(replace(plainto_tsquery('english', array_to_string(CAST(:variants AS text[]), ' '))::text,
                   ' & ', ' | '), '') AS or_query,
    ARRAY(SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', array_to_string(CAST(:variants AS text[]), ' ')))
          ORDER BY lexeme) AS lexemes
""")


def build_lexical_query(session: Session, query: str, groups: Sequence[Sequence[str]]) -> LexicalQuery:
    """Synonym variants of ``query`` (its words capped and deduplicated) turned into AND and OR tsqueries."""
    variants, added = synonym_variants(capped_terms(query), groups)
    variants = list(dict.fromkeys(variants))
    row = session.execute(RESOLVE_TSQUERY_SQL, {"variants": variants}).mappings().one()
    return LexicalQuery(and_query=row["and_query"], or_query=row["or_query"], lexemes=list(row["lexemes"]),
                        synonyms_used=added)


def add_synonym_group(session: Session, terms: Sequence[str]) -> int:
    """Store a new group of equivalent terms (at least two, lower-cased, de-duplicated)."""
    cleaned = list(dict.fromkeys(term.strip().lower() for term in terms if term.strip()))
    if len(cleaned) < 2:

        raise ValidationError("a synonym group needs at least two different terms", {"terms": "at least two"})
    group = SynonymGroup(terms=cleaned)
    session.add(group)
    session.flush()
    return group.id


def delete_synonym_group(session: Session, group_id: int) -> bool:
    """Remove a group; False when it did not exist."""
    return bool(session.execute(sa.delete(SynonymGroup).where(SynonymGroup.id == group_id)).rowcount)
