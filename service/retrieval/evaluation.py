"""Retrieval evaluation on a corpus/queries/qrels set, in a throwaway schema."""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from service.db.migrate import throwaway_schema
from service.knowledge.articles import bulk_add_articles
from service.providers.embeddings import Embedder
from service.retrieval.search import RetrievalSettings, search_knowledge
from service.runtime import Runtime
from service.validation import CONTENT_MAX, TITLE_MAX


@dataclass(frozen=True)
class EvalSet:
    """Documents, queries and graded relevance judgements."""

    corpus: list[dict]
    queries: list[dict]
    qrels: dict[str, dict[str, int]]


def load_eval_set(corpus_path: Path, queries_path: Path, qrels_path: Path) -> EvalSet:
    """Read ``corpus.jsonl`` ({id, title, text}), ``queries.jsonl`` ({id, text}), ``qrels.tsv``."""
    corpus = [json.loads(line) for line in corpus_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = [json.loads(line) for line in queries_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0] == "query_id":
            continue
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return EvalSet(corpus, queries, qrels)


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """Normalised DCG of the first ``k`` ids with graded gains."""
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    """Share of the relevant ids found in the first ``k``."""
    wanted = {doc for doc, gain in relevant.items() if gain > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def success_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    """1.0 when at least one relevant id is in the first ``k``."""
    return 1.0 if any(relevant.get(doc, 0) > 0 for doc in ranked[:k]) else 0.0


def reciprocal_rank_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """1/rank of the first relevant id within ``k``, else 0."""
    for rank, doc in enumerate(ranked[:k], start=1):
        if relevant.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def summarise(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float | int]:
    """Mean metrics over the queries that have judgements."""
    judged = [qid for qid in runs if qrels.get(qid)]
    if not judged:
        raise ValueError("no query has a relevance judgement")

    def mean(metric: Callable[[Sequence[str], dict[str, int]], float]) -> float:
        return sum(metric(runs[qid], qrels[qid]) for qid in judged) / len(judged)

    return {
        "ndcg@10": mean(lambda r, q: ndcg_at(r, q, 10)),
        "recall@3": mean(lambda r, q: recall_at(r, q, 3)),
        "success@3": mean(lambda r, q: success_at(r, q, 3)),
        "mrr@10": mean(lambda r, q: reciprocal_rank_at(r, q, 10)),
        "queries": len(judged),
    }


def corpus_articles(corpus: list[dict]) -> list[dict]:
    """Eval documents as article fields (importance 1, created now)."""
    return [
        {"title": (doc.get("title") or doc["id"])[:TITLE_MAX],
         "content": (doc.get("text") or doc.get("title") or doc["id"])[:CONTENT_MAX],
         "category": None, "importance": 1.0}
        for doc in corpus
    ]


@contextmanager
def throwaway_corpus(runtime: Runtime, corpus: list[dict],
                     on_progress: Callable[[int], None] | None = None) -> Iterator[tuple[Runtime, dict[int, str]]]:
    """Load ``corpus`` into a new schema (never the user's knowledge base); drop it afterwards.

    Yields a runtime searching that schema and the map from article id to corpus id.
    """
    database_url = runtime.engine.url.render_as_string(hide_password=False)
    with throwaway_schema(database_url, "supportrag_eval") as engine:
        eval_runtime = Runtime(runtime.settings, engine, runtime.embedder)
        with eval_runtime.session() as session:
            ids = bulk_add_articles(session, eval_runtime.embedder, corpus_articles(corpus), on_progress=on_progress)
        yield eval_runtime, {article_id: doc["id"] for article_id, doc in zip(ids, corpus)}

def evaluate(runtime: Runtime, eval_set: EvalSet, *, depth: int = 10, retrieval: RetrievalSettings | None = None,
             on_progress: Callable[[str, int], None] | None = None) -> dict[str, float | int]:
    """Run every query through the search path over the corpus in a throwaway schema, and score."""
    settings = retrieval or runtime.retrieval
    return evaluate_settings(runtime, eval_set, {settings.mode: settings}, depth=depth,
                             on_progress=on_progress)[settings.mode]


class _QueryVectors:
    """The embedder, with every query's vector computed up front in batches (the queries are known).

    One batched call instead of one call per query and variant; any other text goes to the real embedder.
    """

    def __init__(self, embedder: Embedder, queries: Sequence[str]) -> None:
        self.inner, self.model_name, self.dimensions = embedder, embedder.model_name, embedder.dimensions
        unique = list(dict.fromkeys(queries))
        self._vectors = dict(zip(unique, embedder.embed(unique))) if unique else {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Known queries from the batch, others from the real embedder."""
        if all(text in self._vectors for text in texts):
            return np.stack([self._vectors[text] for text in texts])
        return self.inner.embed(texts)


def evaluate_settings(runtime: Runtime, eval_set: EvalSet, variants: dict[str, RetrievalSettings], *,
                      depth: int = 10, on_progress: Callable[[str, int], None] | None = None
                      ) -> dict[str, dict[str, float | int]]:
    """Score several retrieval settings on one loaded corpus (embedded once)."""
    corpus_progress = (lambda n: on_progress("corpus", n)) if on_progress else None
    scores: dict[str, dict[str, float | int]] = {}
    with throwaway_corpus(runtime, eval_set.corpus, corpus_progress) as (eval_runtime, doc_of):
        embedder = _QueryVectors(eval_runtime.embedder, [query["text"].strip() for query in eval_set.queries])
        for name, retrieval in variants.items():
            runs: dict[str, list[str]] = {}
            with eval_runtime.session() as session:
                for query in eval_set.queries:
                    results = search_knowledge(session, embedder, query["text"], limit=depth,
                                               weights=runtime.weights, retrieval=retrieval)
                    runs[query["id"]] = [doc_of[result.id] for result in results]
                    if on_progress:
                        on_progress("queries", 1)
            scores[name] = summarise(runs, eval_set.qrels)
    return scores
