"""The service's lexical leg beside plain BM25 (bm25s) on the shared dev sets, in one run (issue 27 item 2).

Run by hand (bm25s and PyStemmer come with the ``bench`` extra: ``pip install -e '.[bench]'``):
    python bench/bm25_compare.py
    python bench/bm25_compare.py --sets covidfaq_dev --title-weights 1 2 3 4
The reference is plain BM25 over title + text as bm25s runs it (Lucene idf, k1 1.5, b 0.75, English Snowball
stems from PyStemmer, its 33 English stop words). The service's row is `supportrag eval`'s lexical mode through
the service's own search path (each corpus loaded into a throwaway schema; vectors cached under artifacts/). Each
line reports nDCG@10 and success@3 of both and the difference; the target is service ≥ bm25s − 0.01.

Lexical mode ranks by BM25 alone (a query vector only reports each result's cosine), so the corpus is loaded with
``KeywordOnlyEmbedder``: the real model's tokenizer, so articles split into the very sections the service makes,
and hashed unit vectors instead of the model's (5,183 SciFact abstracts load in seconds, not an hour under load).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import bm25s
import numpy as np
import Stemmer

from service.config import Settings
from service.retrieval.evaluation import EvalSet, evaluate_settings, load_eval_set, ndcg_at, success_at
from service.runtime import Runtime

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchlib import report  # noqa: E402  (sibling scripts, not a package)

SETS = ("stackfaq_dev", "covidfaq_dev", "scifact_dev", "stackfaq_long_dev")
RESULTS = HERE / "results" / "bm25_compare.jsonl"


class KeywordOnlyEmbedder:
    """The real model's tokenizer and window, with a unit vector hashed from each text instead of its embedding."""

    dimensions = 384

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_name = inner, f"hashed:{inner.model_name}"

    def __getattr__(self, name: str) -> Any:
        """The tokenizer and input window (how articles split into sections) are the real model's."""
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A deterministic unit vector per text."""
        vectors = np.stack([np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))
                            .standard_normal(self.dimensions) for text in texts]).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def bm25s_metrics(eval_set: EvalSet, depth: int = 10) -> dict[str, float]:
    """nDCG@10 and success@3 of bm25s over title + text."""
    stemmer = Stemmer.Stemmer("english")
    ids = [doc["id"] for doc in eval_set.corpus]
    texts = [f"{doc.get('title') or ''} {doc.get('text') or ''}" for doc in eval_set.corpus]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    ndcg, success = [], []
    for query in eval_set.queries:
        relevant = eval_set.qrels.get(query["id"])
        if not relevant:
            continue
        tokens = bm25s.tokenize([query["text"]], stopwords="en", stemmer=stemmer, show_progress=False,
                                return_ids=False)[0]
        ranked: list[str] = []
        if tokens:  # bm25s refuses a query with no known token
            found, scores = retriever.retrieve(bm25s.tokenize([query["text"]], stopwords="en", stemmer=stemmer,
                                                              show_progress=False), k=min(depth, len(ids)),
                                               show_progress=False)
            ranked = [ids[index] for index, score in zip(found[0], scores[0]) if score > 0]
        ndcg.append(ndcg_at(ranked, relevant, 10))
        success.append(success_at(ranked, relevant, 3))
    return {"ndcg@10": sum(ndcg) / len(ndcg), "success@3": sum(success) / len(success)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--title-weights", nargs="+", type=float, help="BM25_TITLE_WEIGHT values (default: the "
                        "configured one)")
    args = parser.parse_args()
    runtime = Runtime.start(Settings.from_env(), seed=False)
    bench_runtime = Runtime(runtime.settings, runtime.engine, KeywordOnlyEmbedder(runtime.embedder))
    lexical = replace(runtime.retrieval, mode="lexical")
    weights = args.title_weights or [lexical.bm25_title_weight]
    variants = {f"service w_title={w:g}": replace(lexical, bm25_title_weight=w) for w in weights}
    for name in args.sets:
        directory = args.shared / "eval" / name
        eval_set = load_eval_set(directory / "corpus.jsonl", directory / "queries.jsonl", directory / "qrels.tsv")
        started = time.perf_counter()
        reference = bm25s_metrics(eval_set)
        service = evaluate_settings(bench_runtime, eval_set, variants)
        for variant, metrics in service.items():
            report(RESULTS, {
                "set": name, "variant": variant, "service_ndcg@10": round(metrics["ndcg@10"], 4),
                "service_success@3": round(metrics["success@3"], 4), "bm25s_ndcg@10": round(reference["ndcg@10"], 4),
                "bm25s_success@3": round(reference["success@3"], 4),
                "difference_ndcg@10": round(metrics["ndcg@10"] - reference["ndcg@10"], 4),
                "queries": metrics["queries"], "seconds": round(time.perf_counter() - started, 1),
                "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
