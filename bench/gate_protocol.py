"""Issue 34's held-out check, end to end over HTTP on a fresh `supportrag serve`: import two thirds of a knowledge
base's articles, ask questions and review each, calibrate, ask others, and measure what customers got.

Run by hand:  python bench/gate_protocol.py ../shared/eval/stackfaq_long_dev [--seed 0] [--labelled 150]
              [--asked 200] [--target 0.9] [--base URL --token TOKEN]
Without ``--base`` it starts the service on a throwaway embedded database (with its five seed articles, as a fresh
install has them) and makes an admin token with `supportrag token create`. Only the public surfaces are used:
POST /api/articles, POST /api/tickets, POST /api/tickets/<id>/review, POST /api/gate/calibrate, GET /api/gate.
The reviewer's verdict is the eval set's: the answer is right when the ticket's rank-1 citation is a relevant
article (what `supportrag eval --answerability` calls right). Prints one JSON line (also appended to
artifacts/bench/gate_protocol.jsonl): precision of the answered, coverage of the answerable and the share of the
unanswerable answered among the later questions, the gate's status after calibrating, and the same figures for the
150 reviewed questions under the default calibrator.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import machine_facts, report  # noqa: E402
from tests.test_serve import SUPPORTRAG, free_port, stop, wait_until_healthy  # noqa: E402

from service.gate.evaluation import hold_back  # noqa: E402  (the same seeded hold-back as the eval command)
from service.retrieval.evaluation import load_eval_set  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "gate_protocol.jsonl"


def call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    """One JSON request as an admin; raises with the error body on a non-2xx answer."""
    request = urllib.request.Request(f"{base}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from None


def start_server(data_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """A fresh `supportrag serve` on the embedded database and an admin token for it."""
    port, log_path = free_port(), data_dir / "server.log"
    env = {**os.environ, "SUPPORTRAG_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(SUPPORTRAG), "serve", "--port", str(port)], env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_until_healthy(process, base, log_path)
    token = subprocess.run([str(SUPPORTRAG), "token", "create", "--name", "gate protocol"], env=env, check=True,
                           capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return process, base, token


def figures(outcomes: list[dict]) -> dict:
    """Precision of the answered, coverage of the answerable, share of the unanswerable answered."""
    answered = [o for o in outcomes if o["answered"]]
    answerable = [o for o in outcomes if o["answerable"]]
    unanswerable = [o for o in outcomes if not o["answerable"]]
    share = lambda part, whole: round(len(part) / len(whole), 3) if whole else None  # noqa: E731
    return {"questions": len(outcomes), "answered": len(answered),
            "precision": share([o for o in answered if o["right"]], answered),
            "coverage_of_answerable": share([o for o in answerable if o["answered"]], answerable),
            "unanswerable_answered": share([o for o in unanswerable if o["answered"]], unanswerable)}


def run(base: str, token: str, set_dir: Path, *, seed: int, labelled: int, asked: int, target: float) -> dict:
    eval_set = load_eval_set(set_dir / "corpus.jsonl", set_dir / "queries.jsonl", set_dir / "qrels.tsv")
    kept, held = hold_back(eval_set.corpus, 1 / 3, seed)
    doc_of: dict[int, str] = {}
    started = time.monotonic()
    for doc in kept:
        created = call(base, token, "POST", "/api/articles",
                       {"title": doc.get("title") or doc["id"], "content": doc["text"], "category": "faq"})
        doc_of[created["article"]["id"]] = doc["id"]
    imported_s = time.monotonic() - started
    queries = [q for q in eval_set.queries if eval_set.qrels.get(q["id"])]
    random.Random(seed).shuffle(queries)

    def ask(query: dict) -> dict:
        relevant = {doc for doc, gain in eval_set.qrels[query["id"]].items() if gain > 0}
        text = query["text"].strip()
        ticket = call(base, token, "POST", "/api/tickets", {"subject": text[:300], "body": text})["ticket"]
        first = next((c for c in ticket.get("citations") or [] if c["rank"] == 1), None)
        return {"id": ticket["id"], "answered": ticket["status"] == "answered",
                "answerable": bool(relevant - held),
                "right": first is not None and doc_of.get(first["article_id"]) in relevant}

    reviewed = [ask(q) for q in queries[:labelled]]
    for outcome in reviewed:
        call(base, token, "POST", f"/api/tickets/{outcome['id']}/review", {"answer_correct": outcome["right"]})
    calibration = call(base, token, "POST", "/api/gate/calibrate", {"target_precision": target})
    status = call(base, token, "GET", "/api/gate")
    later = [ask(q) for q in queries[labelled:labelled + asked]]
    return {"bench": "gate_protocol", "set": set_dir.name, "seed": seed, "articles_imported": len(kept),
            "import_s": round(imported_s, 1), "labelled": labelled, "asked": len(later), "target": target,
            "calibration_message": calibration.get("message"),
            "gate": {k: status.get(k) for k in ("target_precision", "source", "threshold", "labels",
                                                 "estimated_precision", "precision_lower_bound", "coverage")},
            "curve_points": len(status.get("curve") or []),
            "reviewed_under_default": figures(reviewed), "later": figures(later)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set_dir", type=Path, help="an eval set folder: corpus.jsonl, queries.jsonl, qrels.tsv")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--labelled", type=int, default=150)
    parser.add_argument("--asked", type=int, default=200)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--base", help="a running service instead of a fresh one (needs --token)")
    parser.add_argument("--token", help="an admin token for --base")
    args = parser.parse_args()
    options = {"seed": args.seed, "labelled": args.labelled, "asked": args.asked, "target": args.target}
    if args.base:
        if not args.token:
            parser.error("--base needs --token")
        report(RESULTS, run(args.base, args.token, args.set_dir, **options) | machine_facts())
        return
    with tempfile.TemporaryDirectory(prefix="gate-protocol-") as folder:
        process, base, token = start_server(Path(folder))
        try:
            report(RESULTS, run(base, token, args.set_dir, **options) | machine_facts())
        finally:
            stop(process)


if __name__ == "__main__":
    main()
