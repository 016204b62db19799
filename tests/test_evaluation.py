"""Retrieval metrics as pure functions, and ``supportrag eval`` end to end on a real database."""

from __future__ import annotations

import json
from math import log2
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.retrieval.evaluation import (
    load_eval_set,
    ndcg_at,
    recall_at,
    reciprocal_rank_at,
    success_at,
    summarise,
)

from .helpers import run_cli as run

METRIC_KEYS = {"ndcg@10", "recall@3", "success@3", "mrr@10", "queries"}
# Reference: plain MiniLM cosine over title + text scores nDCG@10 0.956 on stackfaq_dev.
REFERENCE_NDCG_AT_10 = 0.956
TEN_MISSES = [f"x{i}" for i in range(10)]


# --- pure metrics -------------------------------------------------------------------------------------


@pytest.mark.parametrize("ranked, relevant, k, expected", [
    (["a", "b", "c"], {"a": 1}, 10, 1.0),
    (["b", "a", "c"], {"a": 1}, 10, 1 / log2(3)),
    (["b", "a", "c"], {"a": 1}, 10, 0.6309297535714575),
    (["x", "y", "a"], {"a": 1}, 10, 0.5),                                   # 1/log2(4)
    # Graded: the grade is the gain, and the ideal order puts the higher grade first.
    (["a", "b"], {"a": 2, "b": 1}, 10, 1.0),
    (["b", "a"], {"a": 2, "b": 1}, 10, (1 + 2 / log2(3)) / (2 + 1 / log2(3))),
    (["x", "b", "a"], {"a": 1, "b": 2}, 10, (2 / log2(3) + 1 / log2(4)) / (2 + 1 / log2(3))),
    # A relevant document that was not retrieved lowers the score through the ideal DCG.
    (["a"], {"a": 1, "missing": 1}, 10, 1 / (1 + 1 / log2(3))),
    # Only the first k count, for the retrieved and the ideal list alike.
    ([*TEN_MISSES, "a"], {"a": 1}, 10, 0.0),
    (["a", "b"], {"a": 1, "b": 1, "c": 1}, 1, 1.0),
    (["b", "a"], {"a": 1, "b": 1, "c": 1}, 2, 1.0),
    # A judged-but-irrelevant (grade 0) document gains nothing.
    (["z", "a"], {"z": 0, "a": 1}, 10, 1 / log2(3)),
    (["x", "y"], {"a": 1}, 10, 0.0),
    ([], {"a": 1}, 10, 0.0),
    (["a"], {}, 10, 0.0),
])
def test_ndcg_uses_graded_gains_with_log2_discount_cut_at_k(ranked, relevant, k, expected):
    assert ndcg_at(ranked, relevant, k) == pytest.approx(expected)


@pytest.mark.parametrize("ranked, relevant, k, expected", [
    (["a", "x", "b", "c"], {"a": 1, "b": 1, "c": 1}, 3, 2 / 3),
    (["a", "x", "b", "c"], {"a": 1, "b": 1, "c": 1}, 1, 1 / 3),
    (["a", "x", "b", "c"], {"a": 1, "b": 1, "c": 1}, 4, 1.0),
    (["b"], {"a": 2, "b": 1}, 3, 0.5),                                       # the grade does not matter
    (["a", "z"], {"a": 1, "z": 0}, 3, 1.0),                                  # grade 0 is not wanted
    (["a", "a", "a"], {"a": 1, "b": 1}, 3, 0.5),                             # duplicates count once
    (["z"], {"z": 0}, 3, 0.0),
    (["a"], {}, 3, 0.0),
])
def test_recall_is_the_share_of_relevant_documents_in_the_first_k(ranked, relevant, k, expected):
    assert recall_at(ranked, relevant, k) == pytest.approx(expected)


@pytest.mark.parametrize("ranked, relevant, k, expected", [
    (["x", "y", "a"], {"a": 1}, 3, 1.0),
    (["x", "y", "a"], {"a": 1}, 2, 0.0),
    (["a"], {"a": 2}, 1, 1.0),
    (["z", "x"], {"z": 0}, 3, 0.0),
    ([], {"a": 1}, 3, 0.0),
])
def test_success_is_one_when_any_relevant_document_is_in_the_first_k(ranked, relevant, k, expected):
    assert success_at(ranked, relevant, k) == expected


@pytest.mark.parametrize("ranked, relevant, k, expected", [
    (["a", "b"], {"a": 1}, 10, 1.0),
    (["x", "a"], {"a": 1}, 10, 0.5),
    (["x", "y", "b", "a"], {"a": 2, "b": 1}, 10, 1 / 3),                    # the first relevant, any grade
    (["z", "a"], {"z": 0, "a": 1}, 10, 0.5),                                 # grade 0 is not a hit
    (["x", "y", "z", "a"], {"a": 1}, 3, 0.0),                                # beyond k
    ([*TEN_MISSES, "a"], {"a": 1}, 10, 0.0),
    ([], {"a": 1}, 10, 0.0),
])
def test_reciprocal_rank_is_one_over_the_rank_of_the_first_relevant_document_within_k(ranked, relevant, k,
                                                                                     expected):
    assert reciprocal_rank_at(ranked, relevant, k) == pytest.approx(expected)


def test_summarise_averages_over_judged_queries_only():
    runs = {
        "q1": ["a", "b", "c"],
        "q2": ["x", "b", "a"],
        "q_no_qrels": ["a"],
        "q_empty_qrels": ["a"],
    }
    qrels = {
        "q1": {"a": 1},
        "q2": {"a": 1, "b": 2},
        "q_empty_qrels": {},
        "q_not_run": {"a": 1},
    }

    metrics = summarise(runs, qrels)

    q2_ndcg = (2 / log2(3) + 1 / log2(4)) / (2 + 1 / log2(3))
    assert metrics == {
        "ndcg@10": pytest.approx((1.0 + q2_ndcg) / 2),
        "recall@3": pytest.approx(1.0),
        "success@3": pytest.approx(1.0),
        "mrr@10": pytest.approx((1.0 + 0.5) / 2),
        "queries": 2,
    }
    assert list(metrics) == ["ndcg@10", "recall@3", "success@3", "mrr@10", "queries"]


def test_summarise_uses_the_metric_cutoffs_3_and_10():
    # The relevant document at rank 4: outside @3, inside @10.
    metrics = summarise({"q": ["w", "x", "y", "a"]}, {"q": {"a": 1}})

    assert metrics["recall@3"] == 0.0
    assert metrics["success@3"] == 0.0
    assert metrics["mrr@10"] == pytest.approx(0.25)
    assert metrics["ndcg@10"] == pytest.approx(1 / log2(5))


def test_summarise_refuses_a_run_without_any_judged_query():
    with pytest.raises(ValueError, match="no query has a relevance judgement"):
        summarise({"q1": ["a"]}, {"q2": {"a": 1}})


def test_load_eval_set_skips_the_header_and_reads_graded_judgements(tmp_path):
    corpus, queries, qrels = write_eval_set(tmp_path, SYNTHETIC_CORPUS, SYNTHETIC_QUERIES, SYNTHETIC_QRELS)

    eval_set = load_eval_set(corpus, queries, qrels)

    assert [doc["id"] for doc in eval_set.corpus] == ["d_password", "d_tracking", "d_refund"]
    assert [query["id"] for query in eval_set.queries] == ["q_password", "q_refund", "q_unjudged"]
    assert eval_set.qrels == {"q_password": {"d_password": 1}, "q_refund": {"d_refund": 2, "d_missing": 1}}


# --- supportrag eval, end to end ----------------------------------------------------------------------


SYNTHETIC_CORPUS = [
    {"id": "d_password", "title": "Reset your password",
     "text": "Forgot your password? Select 'Forgot password' on the sign-in page and we email you a reset link."},
    {"id": "d_tracking", "title": "Track your order",
     "text": "Follow your package with the tracking number in the shipping confirmation email."},
    {"id": "d_refund", "title": "Request a refund",
     "text": "Return an unused item within 30 days of delivery and we give you your money back."},
]
SYNTHETIC_QUERIES = [
    {"id": "q_password", "text": "I forgot my password and cannot sign in"},
    {"id": "q_refund", "text": "How do I get my money back for an item I returned?"},
    {"id": "q_unjudged", "text": "Where is my package?"},
]
# d_missing is judged relevant but absent from the corpus, so q_refund can reach at most half its recall.
SYNTHETIC_QRELS = [("q_password", "d_password", 1), ("q_refund", "d_refund", 2), ("q_refund", "d_missing", 1)]


def write_eval_set(directory: Path, corpus: list[dict], queries: list[dict],
                   qrels: list[tuple[str, str, int]]) -> tuple[Path, Path, Path]:
    """Write corpus.jsonl, queries.jsonl and qrels.tsv (with its header) into ``directory``."""
    paths = directory / "corpus.jsonl", directory / "queries.jsonl", directory / "qrels.tsv"
    paths[0].write_text("".join(json.dumps(doc) + "\n" for doc in corpus), encoding="utf-8")
    paths[1].write_text("".join(json.dumps(query) + "\n" for query in queries), encoding="utf-8")
    paths[2].write_text("query_id\tdoc_id\trelevance\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels),
                        encoding="utf-8")
    return paths








def article_count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one()


def eval_schemas(engine: sa.Engine) -> list[str]:
    """Throwaway evaluation schemas still present in the database."""
    with engine.connect() as conn:
        return conn.execute(sa.text(
            r"SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'supportrag\_eval\_%'"
        )).scalars().all()


def judged_query_count(directory: Path) -> int:
    """Queries of the set that have at least one judgement in qrels.tsv."""
    judged = {line.split("\t")[0] for line in (directory / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]
              if line.strip()}
    queries = [json.loads(line)["id"] for line in (directory / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()]
    return sum(query in judged for query in queries)


@pytest.mark.slow
def test_eval_on_stackfaq_dev_matches_the_minilm_reference_and_leaves_the_knowledge_base_untouched(
        cli_env, db_engine, stackfaq_dir):
    run("seed")
    articles_before = article_count(db_engine)
    assert articles_before == 5

    result = run("eval", stackfaq_dir / "corpus.jsonl", stackfaq_dir / "queries.jsonl",
                 stackfaq_dir / "qrels.tsv", "--json")

    metrics = json.loads(result.stdout)
    assert isinstance(metrics, dict) and metrics.keys() == METRIC_KEYS
    assert metrics["ndcg@10"] >= REFERENCE_NDCG_AT_10 - 0.01, metrics
    assert metrics["queries"] == judged_query_count(stackfaq_dir) == 499
    for key in ("recall@3", "success@3", "mrr@10"):
        assert 0.0 <= metrics[key] <= 1.0
    assert article_count(db_engine) == articles_before
    assert eval_schemas(db_engine) == []


def test_eval_on_a_synthetic_set_gives_the_hand_computed_metrics(cli_env, db_engine, tmp_path):
    paths = write_eval_set(tmp_path, SYNTHETIC_CORPUS, SYNTHETIC_QUERIES, SYNTHETIC_QRELS)

    metrics = json.loads(run("eval", *paths, "--json").stdout)

    # q_password: its one relevant document first → every metric 1.
    # q_refund: d_refund (grade 2) first, d_missing (grade 1) never retrieved →
    #   nDCG = 2 / (2 + 1/log2(3)), recall@3 = 1/2, success@3 = 1, RR = 1.
    # q_unjudged has no judgement and is left out.
    assert metrics == {
        "ndcg@10": pytest.approx((1.0 + 2 / (2 + 1 / log2(3))) / 2, abs=1e-9),
        "recall@3": pytest.approx(0.75),
        "success@3": pytest.approx(1.0),
        "mrr@10": pytest.approx(1.0),
        "queries": 2,
    }
    assert article_count(db_engine) == 0  # the user's (unseeded) knowledge base stays empty
    assert eval_schemas(db_engine) == []


def test_eval_without_json_prints_a_table_row_for_the_default_vector_mode(cli_env, tmp_path):
    paths = write_eval_set(tmp_path, SYNTHETIC_CORPUS, SYNTHETIC_QUERIES, SYNTHETIC_QRELS)

    lines = run("eval", *paths).stdout.splitlines()

    assert [line.split() for line in lines] == [
        ["mode", "ndcg@10", "recall@3", "success@3", "mrr@10", "queries"],
        ["vector", f"{(1.0 + 2 / (2 + 1 / log2(3))) / 2:.4f}", "0.7500", "1.0000", "1.0000", "2"],
    ]
