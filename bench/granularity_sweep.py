"""Retrieval mode × granularity on both dev sets, through the service's search path.

Run by hand:  python bench/granularity_sweep.py [--shared ../shared] [--json bench/results/granularity_sweep.json]
Each set is loaded once into a throwaway schema (as `supportrag eval` does: articles embedded through their
sections) and every variant is scored on it: vector, lexical and hybrid (convex, w=0.95), each with
granularity "section" (an article scores by its best section or its own vector) and "article" (its own
vector only: title + lead). The default must be the best across both sets, not on one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from service.config import Settings
from service.retrieval.evaluation import evaluate_settings, load_eval_set
from service.retrieval.search import RetrievalSettings
from service.runtime import Runtime

HERE = Path(__file__).resolve().parent
SETS = ("stackfaq_dev", "stackfaq_long_dev")
KEYS = ("ndcg@10", "recall@3", "success@3", "mrr@10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    parser.add_argument("--json", type=Path, help="also write the scores here")
    args = parser.parse_args()
    runtime = Runtime.start(Settings.from_env(), seed=False)
    variants = {f"{mode} / {granularity}": RetrievalSettings(mode=mode, granularity=granularity)
                for mode in ("vector", "lexical", "hybrid") for granularity in ("section", "article")}
    results: dict[str, dict[str, dict[str, float | int]]] = {}
    for name in SETS:
        folder = args.shared / "eval" / name
        eval_set = load_eval_set(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels.tsv")
        results[name] = evaluate_settings(runtime, eval_set, variants)
    print(f"{'variant':22s} " + " ".join(f"{s + ' ' + k:>26s}" for s in ("dev", "long") for k in ("nDCG@10", "s@3")))
    for variant in variants:
        cells = [results[s][variant][k] for s in SETS for k in ("ndcg@10", "success@3")]
        print(f"{variant:22s} " + " ".join(f"{value:26.4f}" for value in cells))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
