"""Sweep retrieval modes and fusion rules on the four dev sets through the service's own search path.

Run by hand:
    python bench/fusion_sweep.py --json bench/results/fusion_sweep.json
    python bench/plot_modes.py bench/results/fusion_sweep.json docs/fusion_sweep.svg
Issue 27: covidfaq_dev joins the sets (short FAQ entries, conversational questions), and `--check` prints, for
each hybrid variant, its worst margin over the better of its two legs across the sets (the bar: ≥ −0.005).
Each set's corpus is loaded once into a throwaway schema (as `supportrag eval` does) and every variant is scored
on it: vector, lexical (BM25), and hybrid with the current rule (convex, BM25 over its best match), convex over
min-max or z-score normalised legs, and weighted RRF, at several vector weights. Vectors are cached on disk
(bench/embedding_cache.py, under artifacts/), so a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from service.config import Settings
from service.retrieval.evaluation import evaluate_settings, load_eval_set
from service.retrieval.search import RetrievalSettings
from service.runtime import Runtime

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchlib import report  # noqa: E402  (sibling scripts, not a package)
from embedding_cache import DiskCachedEmbedder  # noqa: E402

RESULTS = HERE / "results" / "fusion_sweep.jsonl"

SETS = ("stackfaq_dev", "stackfaq_long_dev", "scifact_dev", "covidfaq_dev")
RULES = {"convex": (0.95, 0.9, 0.7), "minmax": (0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.93),
         "zscore": (0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97),
         "rrf": (0.5, 0.7)}


def variants(rules: dict[str, tuple[float, ...]]) -> dict[str, RetrievalSettings]:
    """Every setting to score, by name."""
    hybrid = RetrievalSettings(mode="hybrid")
    named = {"vector": RetrievalSettings(mode="vector"), "lexical (BM25)": RetrievalSettings(mode="lexical")}
    for fusion, weights in rules.items():
        for weight in weights:
            named[f"hybrid {fusion} w={weight}"] = replace(hybrid, fusion=fusion, vector_weight=weight)
    return named


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--only", nargs="+", help="variant names to score (default: all)")
    parser.add_argument("--json", type=Path, help="write {set: {variant: metrics}} here (merged with its content)")
    parser.add_argument("--check", action="store_true", help="print each hybrid variant's margin over its legs")
    parser.add_argument("--pool", type=int, help="HYBRID_POOL for the z-score / min-max variants (default 100); "
                        "variant names get a ' pool=N' suffix")
    args = parser.parse_args()
    runtime = Runtime.start(Settings.from_env(), seed=False)
    cached = DiskCachedEmbedder(runtime.embedder)
    sweep_runtime = Runtime(runtime.settings, runtime.engine, cached)
    named = variants(RULES)
    if args.pool:
        named = {f"{name} pool={args.pool}": replace(setting, pool=args.pool) for name, setting in named.items()}
    if args.only:
        suffix = f" pool={args.pool}" if args.pool else ""
        named = {name + suffix: named[name + suffix] for name in args.only}
    results = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    for name in args.sets:
        directory = args.shared / "eval" / name
        eval_set = load_eval_set(directory / "corpus.jsonl", directory / "queries.jsonl", directory / "qrels.tsv")
        started = time.perf_counter()
        scores = evaluate_settings(sweep_runtime, eval_set, named)
        cached.save()
        print(f"\n{name} ({time.perf_counter() - started:.0f} s)")
        print(f"{'variant':24s} {'nDCG@10':>8} {'recall@3':>9} {'success@3':>10} {'MRR@10':>8}")
        for variant, m in scores.items():
            print(f"{variant:24s} {m['ndcg@10']:8.4f} {m['recall@3']:9.4f} {m['success@3']:10.4f} {m['mrr@10']:8.4f}")
        results.setdefault(name, {}).update(scores)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        report(RESULTS, {"set": name, "scores": scores, "load_average": os.getloadavg()})
    if args.check:
        print_margins(results)


def print_margins(results: dict[str, dict[str, dict[str, float]]]) -> None:
    """Each hybrid variant's nDCG@10 less the better of vector and lexical, per set, and the worst of them."""
    print(f"\n{'hybrid variant':28s} " + " ".join(f"{name:>18s}" for name in results) + f" {'worst':>8s}")
    names = sorted({variant for scores in results.values() for variant in scores if variant.startswith("hybrid")})
    for variant in names:
        margins = [scores[variant]["ndcg@10"] - max(scores["vector"]["ndcg@10"], scores["lexical (BM25)"]["ndcg@10"])
                   for scores in results.values() if variant in scores and "vector" in scores
                   and "lexical (BM25)" in scores]
        if margins:
            print(f"{variant:28s} " + " ".join(f"{margin:18.4f}" for margin in margins) + f" {min(margins):8.4f}")


if __name__ == "__main__":
    main()
