"""Exact top-k BM25 that scores only the articles that can reach the top-k (MaxScore, Turtle & Flood 1995).

**The bound.** A term t adds at most ``c(t) = idf(t)·(k1 + 1)`` to any unit's score (tf·(k1+1)/(tf + k1·(…))
≤ k1 + 1), and a unit only has terms its article's card has (a section's words are all in its card), so an
article whose card has only terms of a set T scores at most Σ_{t∈T} c(t). Sort the query's terms by ceiling,
ascending, with prefix sums C_1 ≤ C_2 ≤ …; given θ ≤ the k-th best score, the *non-essential* terms are the
prefix with C_j < θ − m and every article whose card has none of the *essential* rest scores ≤ C_j < θ: strictly
below the k-th best, so it cannot be in the top-k even on a tie broken by id. The candidates are the articles
whose card matches any essential term, through the card's GIN index (an InitPlan builds that tsquery, so the
index condition is known only at run time); ``m = 1e-9·Σ c(t)`` absorbs the float rounding of the sums.

**θ.** The *seed*: up to ``k + SEED_EXTRA`` eligible articles for each of the query's rarest terms (the largest
ceilings; the next rarest joins only while the rarer ones are too few), scored exactly: the k-th best of any
articles' exact scores is ≤ the k-th best of all. With fewer than k seeds (the SEED_TERMS rarest terms are in
fewer than k articles together) θ is 0 and every match is scored, as without pruning.

One statement, so every step reads the same snapshot; the ``lexical`` mode's formula (``formula_leg``) adds a
second pass whose threshold is in BM25 units (proof there).
"""

from __future__ import annotations

from service.retrieval.bm25 import BM25_QUERY, score_articles
from service.retrieval.fragments import ELIGIBLE_WHERE, RECENCY

SEED_EXTRA = 32  # seeds beyond k: more seeds give a higher θ (fewer candidates) but each is scored exactly
SEED_TERMS = 4  # seed from at most this many of the rarest terms
ROUNDING = 1e-9  # the margin m, relative to the sum of the query's ceilings


def _seed(k: str) -> str:
    """The seed articles and their exact scores (``lexical_seed``), and the sum of the ceilings (``bm25_bound``).

    Seed terms: the rarest, then the next rarest while the ones before them are in fewer than ``k + SEED_EXTRA``
    units (so too few articles to seed from), at most SEED_TERMS; up to ``k + SEED_EXTRA`` articles of each."""
    seed = f"{k} + {SEED_EXTRA}"
    return f"""bm25_bound AS MATERIALIZED (
    SELECT sum(ceiling) AS ceilings FROM bm25_query
),
bm25_seed_terms AS MATERIALIZED (
    SELECT CAST(operand AS tsquery) AS query FROM (
        SELECT q.operand, coalesce(sum(q.df) OVER (ORDER BY q.ceiling DESC, q.term
                                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before,
               row_number() OVER (ORDER BY q.ceiling DESC, q.term) AS position
        FROM bm25_query q) AS ranked
    WHERE ranked.before < {seed} AND ranked.position <= {SEED_TERMS}
),
lexical_seed_articles AS MATERIALIZED (
    SELECT DISTINCT ON (kb.id) kb.id, kb.search_vector, kb.bm25_length
    FROM bm25_seed_terms t CROSS JOIN LATERAL (
        SELECT kb.id, kb.search_vector, kb.bm25_length FROM knowledge_base kb
        WHERE kb.search_vector @@ t.query AND {ELIGIBLE_WHERE}
        LIMIT {seed}) AS kb
),
{score_articles("lexical_seed", "lexical_seed_articles")}"""


def essential_query(threshold: str) -> str:
    """The tsquery of the essential terms for the lower bound ``threshold`` (a scalar SQL expression, already
    less the margin): every term but the prefix, by ceiling ascending, whose ceilings sum below it. NULL when
    ``threshold`` is NULL (nothing left to score)."""
    return f"""(SELECT CAST(string_agg(p.operand, ' | ') AS tsquery) FROM (
        SELECT operand, sum(ceiling) OVER (ORDER BY ceiling, term ROWS UNBOUNDED PRECEDING) AS below
        FROM bm25_query) AS p
     WHERE p.below >= {threshold})"""


def _pass(name: str, query: str, scored: str) -> str:
    """``name``: the exact scores of the eligible articles whose card matches ``query`` (a scalar subquery),
    but not those in ``scored``."""
    return f"""{name}_articles AS MATERIALIZED (
    SELECT kb.id, kb.search_vector, kb.bm25_length
    FROM knowledge_base kb
    WHERE kb.search_vector @@ {query} AND {ELIGIBLE_WHERE}
      AND NOT EXISTS (SELECT 1 FROM {scored} d WHERE d.id = kb.id)
),
{score_articles(name, f"{name}_articles")}"""


def top_k_leg(k: str) -> str:
    """CTEs ending in ``lexical_pruned`` (id, lexical_score, lexical_section_id): exact scores of every eligible
    article whose BM25 reaches the k-th best (``k``: a SQL expression, e.g. ``:pool``), and of some below it;
    ``lexical_threshold`` (value, every_term): the bound they were found with, less the margin (every article
    scoring at least that is in ``lexical_pruned``), and whether every term was essential (every match scored)."""
    theta = f"""coalesce((SELECT lexical_score FROM lexical_seed ORDER BY lexical_score DESC
                          LIMIT 1 OFFSET {k} - 1), 0.0)"""
    return f"""{BM25_QUERY},
{_seed(k)},
lexical_threshold AS MATERIALIZED (
    SELECT t.value, t.value <= (SELECT min(ceiling) FROM bm25_query) AS every_term
    FROM (SELECT {theta} - {ROUNDING} * b.ceilings AS value FROM bm25_bound b) AS t
),
{_pass("lexical_essential", essential_query("(SELECT value FROM lexical_threshold)"), "lexical_seed_articles")},
lexical_pruned AS MATERIALIZED (
    SELECT * FROM lexical_seed UNION ALL SELECT * FROM lexical_essential
)"""


def lexical_top_leg(pool: str = ":pool") -> str:
    """CTEs ending in ``lexical_top`` (id, lexical_score, lexical_section_id): the exact top ``pool`` eligible
    articles by BM25 alone, ties by id, as the unpruned ``lexical_leg`` would rank them (hybrid fusion's pool).
    Binds :terms, :tsquery, :bm25_k1, :bm25_b, :bm25_title_weight, :model, :source_prefix and ``pool``."""
    return f"""{top_k_leg(pool)},
lexical_top AS (
    SELECT id, lexical_score, lexical_section_id FROM lexical_pruned
    ORDER BY lexical_score DESC, id
    LIMIT {pool}
)"""


def formula_leg() -> str:
    """CTEs ending in ``lexical`` (id, lexical_score, lexical_section_id): every eligible article that can be in
    the top ``:limit`` by the lexical mode's formula, with its exact BM25, and the exact best BM25 among them.

    The formula is ``score = w_s·s/M + w_r·recency·importance`` (s: BM25, M: the best BM25 of any eligible
    article). A first pass (``top_k_leg(":limit")``) scores every article whose BM25 reaches the k-th best
    BM25, so M (the best) is exact; on those, F is the k-th best formula score, a lower bound of the true k-th
    best F*. No article boosts more than ``B = max(0, w_r·max importance)`` (recency ≤ 1, importance ≥ 0), so
    an article with ``s < θ = M·(F − B)/w_s`` scores ``< w_s·θ/M + B = F ≤ F*``: strictly below the k-th best,
    out even on a tie. The second pass scores the articles whose card has an essential term for θ (less the
    margin, widened by B/w_s for the rounding of the formula's terms), unless θ is no lower than the first
    pass's bound (then they all were). Fewer than k scored: every match was (see the module). ``w_s ≤ 0``:
    BM25 does not rank, every match is scored.

    A rank by BM25 over ``lexical`` is exact for the top-k's rows: each scores at least the bound it was found
    with, and every article that scores at least that is in ``lexical``."""
    first_pass = top_k_leg(":limit")
    threshold = f"""CASE WHEN f.kth IS NULL THEN NULL
                WHEN :similarity_weight <= 0 THEN '-infinity'::double precision
                ELSE f.best * (f.kth - f.boost) / :similarity_weight
                     - {ROUNDING} * b.ceilings * (1.0 + f.boost / :similarity_weight) END"""
    return f"""{first_pass},
lexical_first_scores AS MATERIALIZED (
    SELECT :similarity_weight * p.lexical_score / max(p.lexical_score) OVER ()
           + :recency_weight * {RECENCY} * kb.importance AS score
    FROM lexical_pruned p JOIN knowledge_base kb ON kb.id = p.id
),
lexical_formula_bound AS MATERIALIZED (
    SELECT (SELECT max(lexical_score) FROM lexical_pruned) AS best,
           (SELECT score FROM lexical_first_scores ORDER BY score DESC LIMIT 1 OFFSET :limit - 1) AS kth,
           GREATEST(0.0, :recency_weight * (SELECT max(importance) FROM knowledge_base)) AS boost
),
lexical_formula_threshold AS MATERIALIZED (
    SELECT t.value FROM (SELECT {threshold} AS value FROM lexical_formula_bound f CROSS JOIN bm25_bound b) AS t
    WHERE EXISTS (SELECT 1 FROM lexical_threshold WHERE NOT every_term)  -- else every match was scored
      AND t.value < (SELECT value FROM lexical_threshold)
),
{_pass("lexical_second", essential_query("(SELECT value FROM lexical_formula_threshold)"), "lexical_pruned")},
lexical AS (
    SELECT * FROM lexical_pruned UNION ALL SELECT * FROM lexical_second
)"""
