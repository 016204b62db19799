"""``supportrag import`` of 16,000 short real articles, old tree against new, in turn, through the CLI.

The articles: npm package summaries (bench/realdata.py's source), one article each, titled with the package's name,
written once to ``artifacts/bench-data/``. Each tree (``--tree LABEL=PATH``, e.g. ``old=/tmp/speed-old`` from
``git archive af9c5a3``) runs with its own code on ``PYTHONPATH`` and its own fresh embedded database
(``SUPPORTRAG_DATA_DIR`` under ``artifacts/``), seeding off: ``db upgrade`` first, then the timed
``import FILE`` (wall and peak RSS from ``/usr/bin/time``), then the sections stored are counted.

``--profile`` instead splits the new tree's import into its parts, in this process on the same articles: the
embedder alone (all texts in import-sized batches), and the writes alone (``write_batch`` with the vectors known:
insert, COPY, BM25 column and triggers, the narrow copy) with and without the BM25 triggers.

    git archive af9c5a3 | (mkdir -p /tmp/speed-old && tar -x -C /tmp/speed-old)
    python bench/import_articles.py --tree old=/tmp/speed-old --tree new=.
    python bench/import_articles.py --profile
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib import machine_facts, report
from realdata import DEFAULT_SOURCE, MIN_CHARS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "import_articles.jsonl"
DATA = ROOT / "artifacts" / "bench-data"
CLI = "import sys; from service.cli.main import main; sys.argv[0] = 'supportrag'; main()"


def write_articles(count: int) -> Path:
    """``count`` articles (name, summary) as JSON lines, once."""
    path = DATA / f"npm-articles-{count}.jsonl"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    seen, lines = set(), []
    with DEFAULT_SOURCE.open(encoding="utf-8", errors="replace") as rows:
        next(rows)
        for row in rows:
            fields = row.rstrip("\n").split("\t")
            summary = fields[3].strip() if len(fields) > 3 else ""
            if len(summary) >= MIN_CHARS and summary.lower() not in seen:
                seen.add(summary.lower())
                lines.append(json.dumps({"id": len(lines), "title": fields[0], "content": summary}))
                if len(lines) == count:
                    break
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_tree(label: str, tree: Path, articles: Path) -> dict:
    """Fresh database, migrate, then time the import."""
    data_dir = ROOT / "artifacts" / "bench-import" / label
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "SUPPORTRAG_DATA_DIR": str(data_dir),
           "SUPPORTRAG_AUTO_SEED": "0", "SUPPORTRAG_MODEL_DIR": str(ROOT / "artifacts" / "models")}
    env.pop("DATABASE_URL", None)
    cli = [sys.executable, "-c", CLI]
    where = subprocess.run([sys.executable, "-c", "import service; print(service.__file__)"], env=env, cwd=tree,
                           check=True, capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(tree.resolve())), f"{label} imports {where}, not its own tree"
    upgrade = subprocess.run([*cli, "db", "upgrade"], env=env, cwd=tree, capture_output=True, text=True)
    if upgrade.returncode:
        raise SystemExit(f"{label}: db upgrade failed:\n{upgrade.stderr[-2000:]}")
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cli, "import", str(articles)], env=env, cwd=tree,
                          check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    peak_kb = int(done.stderr.strip().splitlines()[-1].split()[1])
    stats = subprocess.run([*cli, "stats"], env=env, cwd=tree, capture_output=True, text=True).stdout
    shutil.rmtree(data_dir, ignore_errors=True)
    return {f"{label}_wall_s": round(wall, 1), f"{label}_peak_rss_mb": round(peak_kb / 1024),
            f"{label}_summary": done.stdout.strip().splitlines()[-1], f"{label}_stats": " ".join(stats.split())[:200]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--articles", type=int, default=16_000)
    parser.add_argument("--tree", action="append", default=[], help="LABEL=PATH (repeatable, run in order)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    articles = write_articles(args.articles)
    result: dict = {"articles": args.articles, "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    if args.profile:
        from import_profile import profile  # the in-process split (loads the model and a schema)

        result.update(profile(articles))
    for spec in args.tree:
        label, _, path = spec.partition("=")
        result.update(run_tree(label, Path(path), articles))
        result[f"{label}_articles_per_s"] = round(args.articles / result[f"{label}_wall_s"], 1)
    if "old_wall_s" in result and "new_wall_s" in result:
        result["speedup"] = round(result["old_wall_s"] / result["new_wall_s"], 2)
    result.update(machine_facts())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
