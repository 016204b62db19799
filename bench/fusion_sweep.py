"""Measure retrieval modes and fusion weights on the stackfaq dev set through the service's search path.

Run by hand:  python bench/fusion_sweep.py [--shared ../shared] [--json bench/results/fusion_sweep.json]
Loads the corpus once into a throwaway schema (as `supportrag eval` does) and scores each variant:
vector, lexical, and hybrid with convex and RRF fusion at several vector weights.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from service.config import Settings
from service.retrieval.evaluation import evaluate_settings, load_eval_set
from service.retrieval.search import RetrievalSettings
from service.runtime import Runtime

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    parser.add_argument("--json", type=Path, help="also write the scores here")
    args = parser.parse_args()
    dev = args.shared / "eval" / "stackfaq_dev"
    eval_set = load_eval_set(dev / "corpus.jsonl", dev / "queries.jsonl", dev / "qrels.tsv")
    runtime = Runtime.start(Settings.from_env(), seed=False)
    hybrid = RetrievalSettings(mode="hybrid")
    variants = {"vector": RetrievalSettings(mode="vector"), "lexical": RetrievalSettings(mode="lexical")}
    for weight in (0.8, 0.9, 0.95):
        variants[f"hybrid convex w={weight}"] = replace(hybrid, fusion="convex", vector_weight=weight)
    for weight in (0.5, 0.9):
        variants[f"hybrid rrf w={weight}"] = replace(hybrid, fusion="rrf", vector_weight=weight)
    scores = evaluate_settings(runtime, eval_set, variants)
    print(f"{'variant':24s} {'nDCG@10':>8} {'recall@3':>9} {'success@3':>10} {'MRR@10':>8}")
    for name, m in scores.items():
        print(f"{name:24s} {m['ndcg@10']:8.4f} {m['recall@3']:9.4f} {m['success@3']:10.4f} {m['mrr@10']:8.4f}")
    if args.json:
        args.json.write_text(json.dumps(scores, indent=2))


if __name__ == "__main__":
    main()
