"""BM25 in PostgreSQL: statistics kept true by any writer, exact scores, the query side (dedupe, cap, synonyms)."""

from __future__ import annotations

import math
from datetime import datetime, timezone
import time
from collections import Counter

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.config import HYBRID_POOL_MIN, ConfigError, Settings
from service.knowledge.articles import add_article, delete_article, update_article
from service.retrieval.bm25 import (
    MAX_QUERY_TERMS,
    build_bm25_query,
    every_word_query,
    join_terms,
    scored_terms,
    tsquery_literal,
)
from service.retrieval.lexical import load_synonym_groups
from service.retrieval.ranking import RankingWeights
from service.retrieval.search import RetrievalSettings, run_search
from service.retrieval.sql import rank_articles
from service.validation import SEARCH_LIMIT_MAX

from .helpers import FailingEmbedder

MODEL = "bm25-test-model"
LEXICAL = RetrievalSettings(mode="lexical")
# Words that are their own 'english' lexeme and no stop word (checked below), so Python counts the same tokens.
VOCABULARY = ("zinc", "cobalt", "quartz", "basalt", "onyx", "jade", "opal", "amber", "garnet", "topaz", "zircon",
              "mica", "talc", "gypsum", "flint")
RECOUNT_SQL = sa.text("""
SELECT
    (SELECT coalesce(jsonb_object_agg(term, df), '{}') FROM (
        SELECT u.lexeme AS term, count(*) AS df FROM (
            SELECT search_vector FROM knowledge_base WHERE search_vector IS NOT NULL
            UNION ALL SELECT search_vector FROM knowledge_sections WHERE search_vector IS NOT NULL
        ) AS units, unnest(units.search_vector) AS u GROUP BY u.lexeme) AS counted) AS df,
    (SELECT count(*) FROM knowledge_base WHERE search_vector IS NOT NULL)
        + (SELECT count(*) FROM knowledge_sections WHERE search_vector IS NOT NULL) AS units,
    (SELECT coalesce(sum(array_length(u.positions, 1)), 0) FROM knowledge_base kb, unnest(kb.search_vector) u)
        + (SELECT coalesce(sum(array_length(u.positions, 1)), 0)
           FROM knowledge_sections s, unnest(s.search_vector) u) AS total_length
""")
STORED_SQL = sa.text("""
SELECT (SELECT coalesce(jsonb_object_agg(term, df), '{}') FROM bm25_terms) AS df, units, total_length
FROM bm25_totals
""")


def assert_statistics_equal_a_recount(session) -> None:
    stored = session.execute(STORED_SQL).mappings().one()
    recount = session.execute(RECOUNT_SQL).mappings().one()
    assert dict(stored) == dict(recount)


def test_statistics_equal_a_full_recount_after_inserts_updates_and_deletes(seeded):
    with seeded.session() as session:
        assert_statistics_equal_a_recount(session)  # the seed articles, through the indexing use case
        embedder = seeded.embedder
        stored = add_article(session, embedder, {"title": "Zinc and cobalt", "content": (
            "# Zinc and cobalt\n\nIntro about zinc zinc.\n\n## Storage\n\nKeep cobalt dry and the zinc too.\n\n"
            "## Returns\n\nQuartz can be returned within thirty days of delivery.")})
        assert_statistics_equal_a_recount(session)
        update_article(session, embedder, stored.id, {"content": "Only basalt now, basalt and onyx."})
        assert_statistics_equal_a_recount(session)
        update_article(session, embedder, stored.id, {"importance": 1.5})  # no word changed
        session.execute(sa.text("UPDATE knowledge_base SET title = title || ' jade' WHERE id <> :id"),
                        {"id": stored.id})  # many rows in one statement
        assert_statistics_equal_a_recount(session)
        session.execute(sa.text("UPDATE knowledge_sections SET content = content || ' opal opal'"
                                " WHERE ordinal = 0"))
        session.execute(sa.text("UPDATE knowledge_sections SET kind = 'heading' WHERE ordinal = 1"))
        assert_statistics_equal_a_recount(session)
        delete_article(session, stored.id)
        session.execute(sa.text("DELETE FROM knowledge_sections WHERE ordinal = 2"))
        assert_statistics_equal_a_recount(session)
        session.execute(sa.text("TRUNCATE knowledge_sections"))
        assert_statistics_equal_a_recount(session)
        session.execute(sa.text("DELETE FROM knowledge_base"))
        assert_statistics_equal_a_recount(session)
        assert session.execute(STORED_SQL).mappings().one() == {"df": {}, "units": 0, "total_length": 0}


@pytest.mark.parametrize("term, literal", [
    ("refund", "'refund'"), ("o'neil", "'o''neil'"), ("back\\slash", "'back\\\\slash'"), ("a|b", "'a|b'"),
])
def test_a_term_is_quoted_as_one_tsquery_operand(term, literal):
    assert tsquery_literal(term) == literal


@pytest.mark.parametrize("terms, operator, expected", [
    ([], "|", None), (["zinc"], "|", "'zinc'"), (["zinc", "onyx"], "&", "'zinc' & 'onyx'"),
])
def test_terms_join_into_a_flat_tsquery(terms, operator, expected):
    assert join_terms(terms, operator) == expected


@pytest.mark.parametrize("term", ["o'neil", "back\\slash", "a|b", "x:y", "e-mail", "it's!"])
def test_a_quoted_term_parses_as_exactly_that_lexeme(session, term):
    matches = session.execute(sa.text("SELECT array_to_tsvector(ARRAY[CAST(:term AS text)]) @@ CAST(:q AS tsquery)"),
                              {"term": term, "q": tsquery_literal(term)}).scalar_one()
    assert matches


def insert_unit_article(session, title: list[str], sections: list[tuple[list[str], str]], model: str = MODEL,
                        importance: float = 0.0, created_at: datetime | None = None) -> int:
    """An article whose content is its sections' words (each section "text" or "heading"), created now unless
    ``created_at`` says when."""
    content = "\n\n".join(" ".join(words) for words, _ in sections) or "basalt"
    article_id = session.execute(sa.text("""
        INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance, created_at)
        VALUES (:title, :content, :embedding, CAST(l2_normalize(CAST(:embedding AS vector)) AS halfvec), :model,
                :importance, coalesce(CAST(:created_at AS timestamptz), now())) RETURNING id
    """), {"title": " ".join(title), "content": content, "embedding": np.full(1536, 0.02, dtype=np.float32),
           "model": model, "importance": importance, "created_at": created_at}).scalar_one()
    for ordinal, (words, kind) in enumerate(sections):
        session.execute(sa.text("""
            INSERT INTO knowledge_sections (article_id, ordinal, content, char_start, char_end, content_sha256, kind)
            VALUES (:article_id, :ordinal, :content, 0, 1, 'x', :kind)
        """), {"article_id": article_id, "ordinal": ordinal, "content": " ".join(words), "kind": kind})
    return article_id


def brute_force_bm25(corpus: list[tuple[int, list[str], list[tuple[list[str], str]], str]], query: list[str],
                     k1: float, b: float, title_weight: float = 3.0) -> dict[int, float]:
    """Okapi BM25 (Lucene idf) of every eligible article: the best of its card and text sections, a card's title
    occurrences counting ``title_weight`` times each (its length is its words, unweighted)."""
    units: list[tuple[int, Counter, int]] = []  # (article, term frequencies, length)
    for article_id, title, sections, _ in corpus:
        content = [word for words, _ in sections for word in words] or ["basalt"]
        card = Counter(content)
        for word, count in Counter(title).items():
            card[word] += title_weight * count
        units.append((article_id, card, len(title) + len(content)))
        units += [(article_id, Counter(words), len(words)) for words, kind in sections if kind == "text"]
    n = len(units)
    avgdl = sum(length for _, _, length in units) / n
    df = Counter(term for _, counts, _ in units for term in counts)
    eligible = {article_id for article_id, _, _, model in corpus if model == MODEL}
    best: dict[int, float] = {}
    for article_id, counts, length in units:
        score = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * counts[t] * (k1 + 1)
                    / (counts[t] + k1 * (1 - b + b * length / avgdl)) for t in set(query) if counts[t])
        if score > 0 and article_id in eligible:
            best[article_id] = max(best.get(article_id, 0.0), score)
    return best


words = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=12)
articles = st.lists(st.tuples(words, st.lists(st.tuples(words, st.sampled_from(["text", "text", "heading"])),
                                              max_size=3),
                              st.sampled_from([MODEL, MODEL, MODEL, "other-model"])), min_size=1, max_size=12)


def test_vocabulary_words_are_their_own_lexemes(session):
    lexemes = session.execute(sa.text("SELECT ARRAY(SELECT lexeme FROM unnest(bm25_text_vector(:t)))"),
                              {"t": " ".join(VOCABULARY)}).scalar_one()
    assert sorted(lexemes) == sorted(VOCABULARY)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=articles, query=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6),
       limit=st.integers(1, 10), k1=st.sampled_from([1.2, 0.9, 2.0]), b=st.sampled_from([0.75, 0.0, 1.0]),
       title_weight=st.sampled_from([3.0, 1.0, 0.5]))
def test_bm25_top_k_is_exactly_a_brute_force_bm25(session, corpus, query, limit, k1, b, title_weight):
    savepoint = session.begin_nested()
    try:
        session.execute(sa.text("DELETE FROM knowledge_base"))  # N and df are this corpus's alone
        stored = [(insert_unit_article(session, title, sections, model), title, sections, model)
                  for title, sections, model in corpus]
        expected = brute_force_bm25(stored, query, k1, b, title_weight)
        outcome = run_search(session, FailingEmbedder(model_name=MODEL), " ".join(query), limit=limit,
                             retrieval=RetrievalSettings(mode="lexical", bm25_k1=k1, bm25_b=b,
                                                         bm25_title_weight=title_weight))
        ranked = sorted(expected, key=lambda article_id: (-round(expected[article_id], 9), article_id))[:limit]
        # the top scores in order; articles whose scores tie to 9 decimals may come in either order (PostgreSQL's
        # sums over sections can differ from Python's in the last bits, seen once in a full run)
        returned = [result.id for result in outcome.results]
        assert [round(expected[i], 9) for i in returned] == [round(expected[i], 9) for i in ranked]
        assert len(set(returned)) == len(returned) and set(returned) <= set(expected)
        for result in outcome.results:
            assert result.explain.lexical_score == pytest.approx(expected[result.id], rel=1e-9)
    finally:
        savepoint.rollback()


def lexical_search(session, query: str, limit: int = 5):
    return run_search(session, FailingEmbedder(model_name=MODEL), query, limit=limit, retrieval=LEXICAL)


def test_a_repeated_word_or_its_synonym_weighs_its_idf_once(session):
    refund = insert_unit_article(session, ["refund", "zinc"], [(["refund", "policy", "onyx"], "text")])
    insert_unit_article(session, ["cobalt"], [(["quartz", "opal"], "text")])
    once = lexical_search(session, "refund").results
    repeated = lexical_search(session, "refund refund refund").results
    synonym = lexical_search(session, "refund or reimbursement, money back").results  # a group of the seed
    assert [r.id for r in once] == [r.id for r in repeated] == [refund]
    assert repeated[0].explain.lexical_score == pytest.approx(once[0].explain.lexical_score)
    assert synonym[0].id == refund
    assert synonym[0].explain.lexical_score == pytest.approx(once[0].explain.lexical_score)  # "refund" once


def test_a_20000_character_query_keeps_the_rarest_terms_and_stays_fast(session):
    rare = insert_unit_article(session, ["garnet"], [(["garnet", "zinc"], "text")])
    for number in range(30):
        insert_unit_article(session, ["zinc"], [(["zinc", "cobalt"], "text")])
    common = " ".join(f"word{number} zinc cobalt" for number in range(1500))  # ~1,500 distinct lexemes
    filler = session.execute(sa.text("SELECT string_agg('w' || i || 'x', ' ') FROM generate_series(1, 40) AS i"
                                     )).scalar_one()
    insert_unit_article(session, ["filler"], [(filler.split(), "text")])
    query = ("garnet " + filler + " " + common)[:20_000]
    started = time.perf_counter()
    built = build_bm25_query(session, query, load_synonym_groups(session))
    outcome = lexical_search(session, query)
    elapsed = time.perf_counter() - started
    assert len(built.terms) == MAX_QUERY_TERMS
    assert built.terms[0] == "garnet"  # df 1: the rarest term is kept first
    assert "zinc" not in built.terms  # in 32 units: dropped behind 31 rarer terms
    assert rare in [result.id for result in outcome.results]
    assert elapsed < 2.0


@pytest.mark.parametrize("lexemes, dfs, expected_terms, expected_every_word", [
    ([], [], [], None),
    ([["zinc", "onyx"]], [[0, 3]], ["onyx"], "('zinc')"),  # zinc is in no unit: it cannot score, nor all match
    ([["refund", "polici"], ["polici", "reimburs"]], [[2, 5], [5, 1]], ["reimburs", "refund"],
     "('refund') | ('polici')"),
])
def test_terms_are_distinct_across_variants_rarest_first_and_every_word_stays_per_variant(
        lexemes, dfs, expected_terms, expected_every_word):
    assert scored_terms(lexemes, dfs, 2) == expected_terms
    assert every_word_query(lexemes, 1) == expected_every_word


def test_a_word_no_article_has_means_not_every_word_matched(session):
    insert_unit_article(session, ["zinc"], [(["zinc", "cobalt"], "text")])
    outcome = lexical_search(session, "zinc unobtainium", limit=1)
    assert outcome.results and outcome.lexical_match == "or" and outcome.all_words_matches == 0
    assert lexical_search(session, "zinc cobalt", limit=1).lexical_match == "and"


def pool_of(scores: dict[int, float], size: int) -> list[int]:
    """The ``size`` best ids by score, ties by id (positive scores only: BM25 0 is no match)."""
    return sorted((i for i in scores if scores[i] > 0 or size < 0), key=lambda i: (-scores[i], i))[:abs(size)]


@pytest.mark.parametrize("fusion, weight", [("minmax", 0.5), ("minmax", 0.8), ("zscore", 0.5), ("zscore", 0.9)])
def test_normalised_fusion_fuses_each_legs_pool_scaled_by_its_spread_over_the_whole_base(session, fusion, weight):
    session.execute(sa.text("DELETE FROM knowledge_base"))
    rng = np.random.default_rng(7)
    for number in range(12):
        vector = np.zeros(1536, dtype=np.float32)
        vector[:4] = rng.standard_normal(4)
        session.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model, importance)
            VALUES (:title, :content, :embedding, CAST(l2_normalize(CAST(:embedding AS vector)) AS halfvec), :model,
                    1.0)
        """), {"title": f"article {number}", "embedding": vector / np.linalg.norm(vector), "model": MODEL,
               "content": " ".join(rng.choice(VOCABULARY[:6], size=int(rng.integers(1, 6))))})
    query = build_bm25_query(session, "zinc cobalt", [])
    query_vector = np.zeros(1536, dtype=np.float32)
    query_vector[0] = 1.0
    now = datetime.now(timezone.utc)
    legs = session.execute(sa.text("""
        SELECT id, 1.0 - (embedding <=> CAST(:q AS vector)) AS full,
               1.0 - (embedding_half <=> CAST(l2_normalize(CAST(:q AS vector)) AS halfvec)) AS half
        FROM knowledge_base"""), {"q": query_vector}).all()
    similarity, half = {r.id: r.full for r in legs}, [r.half for r in legs]
    by_bm25 = rank_articles(session, query_vector, model=MODEL, limit=12, weights=RankingWeights(recency_weight=0.0),
                            retrieval=RetrievalSettings(mode="lexical"), now=now, tsquery=query.any_term,
                            lexemes=query.terms)
    bm25 = {i: 0.0 for i in similarity} | {r.id: r.lexical_score for r in by_bm25}
    stats = session.execute(sa.text("SELECT t.df, n.units FROM bm25_terms t CROSS JOIN bm25_totals n"
                                    " WHERE t.term = ANY(:terms)"), {"terms": query.terms}).all()
    if fusion == "zscore":
        vector_spread = float(np.std(half))
        lexical_spread = math.sqrt(sum(math.log(1 + (n - df + 0.5) / (df + 0.5)) ** 2 * df / n * (1 - df / n)
                                       for df, n in stats))
    else:
        vector_spread, lexical_spread = max(half) - min(half), max(bm25.values())
    pool = set(pool_of(similarity, -3)) | set(pool_of(bm25, 3))  # GREATEST(pool 2, limit 3)
    combined = {i: weight * similarity[i] / vector_spread + (1 - weight) * bm25[i] / lexical_spread for i in pool}
    low, high = min(combined.values()), max(combined.values())
    expected = sorted(pool, key=lambda i: (-(combined[i] - low) / (high - low), i))[:3]

    rows = rank_articles(session, query_vector, model=MODEL, limit=3, weights=RankingWeights(),
                         retrieval=RetrievalSettings(mode="hybrid", fusion=fusion, vector_weight=weight, pool=2),
                         now=now, tsquery=query.any_term, and_tsquery=query.all_terms, lexemes=query.terms)
    assert len(pool) > 3 and set(pool) != set(similarity)  # the pool is more than the page and less than the base
    assert [r.id for r in rows] == expected
    assert [r.relevance for r in rows] == pytest.approx([(combined[i] - low) / (high - low) for i in expected],
                                                        abs=1e-6)


def test_the_pool_is_never_smaller_than_the_largest_page():
    assert HYBRID_POOL_MIN == SEARCH_LIMIT_MAX  # so a longer page never changes the pool a shorter one ranks
    assert Settings.from_env({"HYBRID_POOL": "50"}).hybrid_pool == 50
    for bad in ("49", "0", "many"):
        with pytest.raises(ConfigError, match="HYBRID_POOL"):
            Settings.from_env({"HYBRID_POOL": bad})
