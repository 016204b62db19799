"""How long a bare ``import MODULE`` takes in a fresh interpreter, and which heavy packages it drags in.

    python bench/import_time.py [MODULE] [--runs N]

Each run is a new ``python -X importtime -c "import MODULE"``; prints the median wall time, the median of the
module's own cumulative import time (importtime's figure, the interpreter's start-up excluded), the number of modules
loaded and whether flask / torch / sentence_transformers were among them. The baseline in the same run is
``python -c pass`` (the interpreter alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import report

HEAVY = ("flask", "torch", "sentence_transformers")
RESULTS = Path(__file__).resolve().parent / "results" / "import_time.jsonl"


def run_once(code: str) -> tuple[float, list[tuple[str, int, int]]]:
    """Wall seconds of one interpreter running ``code``, and its (module, cumulative µs, depth) import lines."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          check=True)
    elapsed = time.perf_counter() - started
    modules = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            depth = (len(name) - len(name.lstrip()) - 1) // 2
            modules.append((name.strip(), int(cumulative), depth))
    return elapsed, modules


def main() -> None:
    """Time the import against the bare interpreter and report the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("module", nargs="?", default="service.retrieval.precision")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    bare = [run_once("pass")[0] for _ in range(args.runs)]
    walls, own, counts, heavy = [], [], [], set()
    for _ in range(args.runs):
        wall, modules = run_once(f"import {args.module}")
        walls.append(wall)
        # Top-level lines of the module's own package: the package, then each subpackage the statement imports.
        top = args.module.split(".")[0]
        own.append(sum(us for name, us, depth in modules if depth == 0 and name.split(".")[0] == top) / 1e6)
        counts.append(len(modules))
        heavy |= {name for name, _, _ in modules if name.split(".")[0] in HEAVY}
    report(RESULTS, {
        "bench": "import_time", "module": args.module, "runs": args.runs,
        "load_average": os.getloadavg(), "python_bare_s": round(statistics.median(bare), 4),
        "wall_s": round(statistics.median(walls), 4), "import_s": round(statistics.median(own), 4),
        "modules": int(statistics.median(counts)), "heavy": sorted(h for h in heavy if "." not in h),
    })


if __name__ == "__main__":
    main()
