"""nDCG@10 of every shared dev set in every mode, old tree (torch MiniLM) against new (ONNX), through ``supportrag eval``.

Each tree (``--tree LABEL=PATH``) runs its own code (``PYTHONPATH``) on its own fresh embedded database; the sets
are ../shared/eval's dev sets. One JSON line per run with every (set, mode) figure and the differences.

    python bench/eval_embedders.py --tree old=/tmp/speed-old --tree new=.
    python bench/eval_embedders.py --tree old=. --tree new=. --env old:EMBEDDING_PRECISION=fp32 \
        --env new:EMBEDDING_PRECISION=int8          # the same tree, two settings
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchlib import machine_facts, report

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "eval_embedders.jsonl"
EVAL = ROOT.parent / "shared" / "eval"
SETS = ("stackfaq_dev", "stackfaq_long_dev", "scifact_dev", "covidfaq_dev")
MODES = ("vector", "lexical", "hybrid")
CLI = "import sys; from service.cli.main import main; sys.argv[0] = 'supportrag'; main()"


def run_tree(label: str, tree: Path, sets: tuple[str, ...] = SETS, extra_env: dict | None = None) -> dict:
    data_dir = ROOT / "artifacts" / "bench-eval" / label
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "SUPPORTRAG_DATA_DIR": str(data_dir),
           "SUPPORTRAG_AUTO_SEED": "0", "SUPPORTRAG_MODEL_DIR": str(ROOT / "artifacts" / "models")} | (extra_env or {})
    env.pop("DATABASE_URL", None)
    scores = {}
    for name in sets:
        folder = EVAL / name
        modes = [arg for mode in MODES for arg in ("--mode", mode)]
        done = subprocess.run([sys.executable, "-c", CLI, "eval", str(folder / "corpus.jsonl"),
                               str(folder / "queries.jsonl"), str(folder / "qrels.tsv"), *modes, "--json"],
                              env=env, cwd=tree, check=True, capture_output=True, text=True)
        for mode, metrics in json.loads(done.stdout.strip().splitlines()[-1]).items():
            scores[f"{name}/{mode}"] = round(metrics["ndcg@10"], 4)
        print(label, name, {k: v for k, v in scores.items() if k.startswith(name)}, flush=True)
    shutil.rmtree(data_dir, ignore_errors=True)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", default=[], help="LABEL=PATH (repeatable)")
    parser.add_argument("--env", action="append", default=[], help="LABEL:KEY=VALUE, a setting for one run")
    parser.add_argument("--set", dest="sets", action="append", choices=SETS, help="only these sets (repeatable)")
    args = parser.parse_args()
    result: dict = {"load_average_start": [round(x, 2) for x in os.getloadavg()]}
    runs, settings = {}, {}
    for spec in args.env:
        label, _, assignment = spec.partition(":")
        key, _, value = assignment.partition("=")
        settings.setdefault(label, {})[key] = value
    result["settings"] = settings
    for spec in args.tree:
        label, _, path = spec.partition("=")
        runs[label] = run_tree(label, Path(path), tuple(args.sets or SETS), settings.get(label))
    result["ndcg@10"] = runs
    if {"old", "new"} <= set(runs):  # (labels: "old" and "new"; a run per tree may use its own label)
        result["new_minus_old"] = {key: round(runs["new"][key] - runs["old"][key], 4) for key in runs["old"]}
        result["max_abs_difference"] = max(abs(v) for v in result["new_minus_old"].values())
    result.update(machine_facts())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
