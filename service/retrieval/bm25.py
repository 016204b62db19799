"""Okapi BM25 inside PostgreSQL: the query's terms, and the SQL of the lexical leg that scores them.

Statistics (migration 0014, kept by triggers): ``bm25_terms`` (df per lexeme), ``bm25_totals`` (N units and
their summed length), ``bm25_length`` on each unit. A unit is an article's card (``knowledge_base.search_vector``,
title + content) or a text section (``knowledge_sections.search_vector``, heading path + text). Term frequency
is the number of positions a lexeme has in the unit's tsvector, read by marking the query's lexemes with weight C
(which no stored vector uses: cards are A and B, sections D) and keeping only those (``ts_filter``), in C, rather
than unnesting every lexeme of every candidate.

    idf(t)    = ln(1 + (N − df + 0.5) / (df + 0.5))                      (Lucene's, never negative)
    tf(t, u)  = occurrences in the unit, a card's title occurrences counting w_title times each
    score(u)  = Σ idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·len(u)/avgdl))   over the query's distinct terms
    article   = the best of its card and its sections

The card is scored over its fields together, BM25F-style (Robertson, Zaragoza & Taylor 2004's field-weighted
term frequency, one length normalisation): the title's evidence and the body's add up, the title's weighing
more (``BM25_TITLE_WEIGHT``, 3 by default, tuned on the four dev sets: docs/retrieval-quality.md). Any tf still
adds less than idf·(k1 + 1), so the pruning's ceilings hold. The vectors are ``bm25_text_vector`` (migration
0025): Snowball English stems with only Lucene's 33 stop words removed, so question words score (by their idf).

Candidates are the articles whose card matches any query term, through the card's GIN index: a section's words
are all in its article's card, so no section can match without its article matching. ``lexical_leg`` scores them
all (the hybrid statements); service.retrieval.bm25_prune scores only those that can reach the top-k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.retrieval.lexical import synonym_variants

MAX_QUERY_TERMS = 32  # the rarest terms of a long query: they carry its ranking; common ones add little
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75


@dataclass(frozen=True)
class Bm25Query:
    """The distinct terms one search scores (each once, with its own idf) and the tsquery that finds them."""

    terms: list[str]  # lexemes some unit has, rarest first, at most MAX_QUERY_TERMS
    any_term: str | None  # 'a' | 'b' | …: the candidates (None when no term occurs anywhere)
    all_terms: str | None  # (a & b) | (c & b): some variant's every word (the degraded gate's test)
    synonyms_used: list[str]


def tsquery_literal(term: str) -> str:
    """A lexeme as a quoted tsquery operand, taken as it is (no parsing or stemming)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def join_terms(terms: Sequence[str], operator: str) -> str | None:
    """``'a' | 'b'`` (or ``&``): a flat tsquery over the terms, None when there are none."""
    return f" {operator} ".join(tsquery_literal(term) for term in terms) or None


# Stemming and stop words are the stored vectors' (``bm25_text_vector``, migration 0025): each variant's distinct
# lexemes, rarest first (df 0: no unit has it), and which of them are content words (not on Snowball's stop list,
# so not "what", "how", "can"): those alone make the every-word test, as before the question words were scored.
VARIANT_LEXEMES_SQL = sa.text("""
WITH variants AS MATERIALIZED (
    SELECT v.text, v.number FROM unnest(CAST(:variants AS text[])) WITH ORDINALITY AS v (text, number)
),
content AS MATERIALIZED (
    SELECT v.number, c.lexeme FROM variants v CROSS JOIN LATERAL unnest(to_tsvector('english', v.text)) AS c
)
SELECT array_agg(u.lexeme ORDER BY coalesce(t.df, 0), u.lexeme) AS lexemes,
       array_agg(coalesce(t.df, 0) ORDER BY coalesce(t.df, 0), u.lexeme) AS dfs,
       coalesce(array_agg(u.lexeme ORDER BY coalesce(t.df, 0), u.lexeme) FILTER (WHERE c.lexeme IS NOT NULL),
                ARRAY[]::text[]) AS content_lexemes
FROM variants v
CROSS JOIN LATERAL unnest(bm25_text_vector(v.text)) AS u
LEFT JOIN content c ON c.number = v.number AND c.lexeme = u.lexeme
LEFT JOIN bm25_terms t ON t.term = u.lexeme
GROUP BY v.number
ORDER BY v.number
""")


def every_word_query(variant_lexemes: Sequence[Sequence[str]], max_terms: int) -> str | None:
    """``(a & b) | (c & b)``: some variant's words all match (each variant's rarest ``max_terms`` words)."""
    groups = [join_terms(lexemes[:max_terms], "&") for lexemes in variant_lexemes if lexemes]
    return " | ".join(f"({group})" for group in groups) or None


def scored_terms(variant_lexemes: Sequence[Sequence[str]], variant_dfs: Sequence[Sequence[int]],
                 max_terms: int) -> list[str]:
    """The distinct lexemes some unit has, over every variant, rarest first, at most ``max_terms``."""
    df = {lexeme: count for lexemes, dfs in zip(variant_lexemes, variant_dfs) for lexeme, count in zip(lexemes, dfs)}
    return sorted((lexeme for lexeme, count in df.items() if count > 0), key=lambda t: (df[t], t))[:max_terms]


def build_bm25_query(session: Session, query: str, groups: Sequence[Sequence[str]], *,
                     max_terms: int = MAX_QUERY_TERMS) -> Bm25Query:
    """The query and its synonym variants as one deduplicated, capped set of terms (a lexeme no unit has can
    match nothing and is dropped before the cap), and the every-word query over each variant."""
    variants, added = synonym_variants(query, groups)
    rows = session.execute(VARIANT_LEXEMES_SQL, {"variants": variants}).all()
    lexemes, dfs = [list(row.lexemes) for row in rows], [list(row.dfs) for row in rows]
    terms = scored_terms(lexemes, dfs, max_terms)
    every_word = every_word_query([list(row.content_lexemes) for row in rows], max_terms)
    return Bm25Query(terms=terms, any_term=join_terms(terms, "|"), all_terms=every_word, synonyms_used=added)


# Each query term's idf and ceiling (no unit's occurrences of the term add more than idf·(k1 + 1) to its score,
# since tf·(k1+1)/(tf + k1·(…)) ≤ k1 + 1), and the term as a tsquery operand (quoted as ``tsquery_literal``
# quotes it). Binds :terms, :bm25_k1.
BM25_QUERY = r"""bm25_query AS MATERIALIZED (
    SELECT t.term, t.df, ln(1.0 + (n.units - t.df + 0.5) / (t.df + 0.5)) AS idf,
           ln(1.0 + (n.units - t.df + 0.5) / (t.df + 0.5)) * (:bm25_k1 + 1.0) AS ceiling,
           n.total_length::double precision / NULLIF(n.units, 0) AS avgdl,
           '''' || replace(replace(t.term, '\', '\\'), '''', '''''') || '''' AS operand
    FROM bm25_terms t CROSS JOIN bm25_totals n
    WHERE t.term = ANY(CAST(:terms AS text[]))
)"""


def score_articles(name: str, articles: str) -> str:
    """CTEs ending in ``name`` (id, lexical_score, lexical_section_id): the exact BM25 of each article of the CTE
    ``articles`` (id, search_vector, bm25_length) a query term matches, and the unit that gave it. A card's title
    occurrences (weight A) count ``:bm25_title_weight`` times each (read from the card's short title part)."""
    return f"""{name}_units AS (
    SELECT a.id AS article_id, NULL::bigint AS section_id, a.search_vector AS vector, a.bm25_length AS length,
           ts_filter(a.search_vector, '{{a}}') AS title
    FROM {articles} a
    UNION ALL
    SELECT s.article_id, s.id, s.search_vector, s.bm25_length, NULL::tsvector
    FROM knowledge_sections s JOIN {articles} a ON a.id = s.article_id
    WHERE s.search_vector @@ CAST(:tsquery AS tsquery)
),
{name}_unit_scores AS (
    SELECT u.article_id, u.section_id,
           sum(q.idf * f.tf * (:bm25_k1 + 1.0)
               / (f.tf + :bm25_k1 * (1.0 - :bm25_b + :bm25_b * u.length / q.avgdl))) AS score
    FROM {name}_units u
    CROSS JOIN LATERAL unnest(ts_filter(setweight(u.vector, 'C', CAST(:terms AS text[])), '{{c}}')) AS x
    JOIN bm25_query q ON q.term = x.lexeme
    CROSS JOIN LATERAL (SELECT coalesce(array_length(x.positions, 1), 1)::double precision
                               + (:bm25_title_weight - 1.0) * coalesce((
                                   SELECT coalesce(array_length(t.positions, 1), 1) FROM unnest(u.title) AS t
                                   WHERE t.lexeme = x.lexeme), 0) AS tf) AS f
    GROUP BY u.article_id, u.section_id
),
{name} AS (
    SELECT DISTINCT ON (article_id) article_id AS id, score AS lexical_score, section_id AS lexical_section_id
    FROM {name}_unit_scores
    WHERE score > 0
    ORDER BY article_id, score DESC, section_id NULLS FIRST
)"""


def lexical_leg(rows: str) -> str:
    """The CTE ``lexical`` (id, lexical_score, lexical_section_id): the exact BM25 of every article of the CTE
    ``rows`` (an ``id`` column) that a query term matches, no pruning (the hybrid statements' leg, or the exact
    BM25 of a few chosen articles). Binds :terms, :tsquery, :bm25_k1, :bm25_b, :bm25_title_weight."""
    return f"{BM25_QUERY},\n{lexical_scores(rows)}"


def lexical_scores(rows: str) -> str:
    """``lexical_leg`` without ``bm25_query``, for a statement that already has it (the hybrid pool's)."""
    return f"""lexical_articles AS MATERIALIZED (
    SELECT kb.id, kb.search_vector, kb.bm25_length
    FROM knowledge_base kb JOIN {rows} e ON e.id = kb.id
    WHERE kb.search_vector @@ CAST(:tsquery AS tsquery)
),
{score_articles("lexical", "lexical_articles")}"""


# The leg of the hybrid statements (service.retrieval.sql): every eligible article a term matches.
LEXICAL_LEG = lexical_leg("eligible")
