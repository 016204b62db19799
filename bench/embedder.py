"""The local embedder, torch reference against ONNX Runtime (its fp32 and int8 graphs) in one run: throughput, peak
RSS, agreement.

Same texts for both: a fixed sample of the shared eval corpora (title + text, as articles are embedded: short FAQ
entries and long abstracts past the 256-piece window) and of their queries. Each backend runs in its own process
(its peak RSS is its own: ``ru_maxrss``), warms up on a few texts, then embeds the sample ``--repeat`` times (the
best counts: a shared machine's noise). The ONNX vectors are compared with the reference's (mean and minimum
cosine). ``--cli`` also times ``supportrag search`` (wall and peak RSS, fresh process each, the database up), with
the default precision unless ``EMBEDDING_PRECISION`` is set.

    python bench/embedder.py --texts 2000
    python bench/embedder.py --texts 0 --cli 5      # the CLI only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchlib import machine_facts, report

RESULTS = Path(__file__).resolve().parent / "results" / "embedder.jsonl"
EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval"
SETS = ("stackfaq_dev", "scifact_dev", "covidfaq_dev")


def sample_texts(count: int, seed: int = 3) -> list[str]:
    """``count`` real texts: documents (title + text) and queries of the shared dev sets, shuffled."""
    texts = []
    for name in SETS:
        for line in (EVAL / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            texts.append(f"{doc.get('title', '').strip()}\n\n{doc['text'].strip()}".strip())
        for line in (EVAL / name / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            texts.append(json.loads(line)["text"])
    picks = np.random.default_rng(seed).permutation(len(texts))[:count]
    return [texts[i] for i in picks]


def child(backend: str, count: int, repeat: int, out: Path) -> None:
    """Load one backend, embed the sample, write its vectors and figures."""
    started = time.perf_counter()
    if backend == "torch":
        from service.providers.torch_reference import TorchReferenceEmbedder

        embedder = TorchReferenceEmbedder()
    else:
        from service.providers.embeddings import LocalEmbedder

        embedder = LocalEmbedder(precision=backend)
    embedder.embed(["warm up the model", "and its kernels"])
    load_s = time.perf_counter() - started
    texts = sample_texts(count)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        vectors = embedder.embed(texts)
        best = min(best, time.perf_counter() - started)
    np.save(out.with_suffix(".npy"), np.asarray(vectors, dtype=np.float32))
    out.write_text(json.dumps({"load_s": round(load_s, 2), "texts_per_s": round(len(texts) / best, 1),
                               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def run_child(backend: str, count: int, repeat: int, folder: Path) -> tuple[dict, np.ndarray]:
    out = folder / f"{backend}.json"
    subprocess.run([sys.executable, __file__, "--child", backend, "--texts", str(count), "--repeat", str(repeat),
                    "--out", str(out)], check=True)
    return json.loads(out.read_text()), np.load(out.with_suffix(".npy"))


HOLD_SERVER = """
import sys
from service.config import Settings
from service.db.embedded import start_embedded_server
start_embedded_server(Settings.from_env().embedded_pgdata)
print("up", flush=True)
sys.stdin.read()  # until the bench closes it; exiting normally detaches (and stops the server if last)
"""


def time_cli(runs: int) -> dict:
    """Wall time and peak RSS of ``supportrag search`` (a fresh process each time)."""
    command = [str(Path(sys.executable).with_name("supportrag")), "search", "I forgot my password", "--limit", "1"]
    # The embedded server stays up while a process is attached (as under `supportrag serve`): hold it.
    holder = subprocess.Popen([sys.executable, "-c", HOLD_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    holder.stdout.readline()
    walls, peaks = [], []
    try:
        subprocess.run(command, check=True, capture_output=True)  # migrate, seed, warm the page cache
        for _ in range(runs):
            started = time.perf_counter()
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(process.pid, 0)
            walls.append(time.perf_counter() - started)
            peaks.append(usage.ru_maxrss / 1024)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    return {"cli_search_wall_s_median": round(float(np.median(walls)), 2), "cli_search_wall_s_min": round(min(walls), 2),
            "cli_search_peak_rss_mb": round(max(peaks)), "cli_runs": runs}


def measure_serve(port: int, requests: int) -> dict:
    """RSS of ``supportrag serve`` (gunicorn, one worker) after ``requests`` searches over HTTP."""
    import json as _json
    import urllib.request

    import psutil

    command = [str(Path(sys.executable).with_name("supportrag")), "serve", "--port", str(port), "--workers", "1"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = _json.dumps({"query": "I forgot my password", "limit": 3}).encode()
        for attempt in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read()
                break
            except OSError:
                time.sleep(0.5)
        for i in range(requests):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/search", data=body,
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=60).read()
        master = psutil.Process(server.pid)
        workers = master.children()
        return {"serve_master_rss_mb": round(master.memory_info().rss / 2**20),
                "serve_worker_rss_mb": [round(w.memory_info().rss / 2**20) for w in workers],
                "serve_requests": requests}
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cli", type=int, default=0, help="time this many CLI searches")
    parser.add_argument("--serve", type=int, default=0, metavar="PORT", help="measure a serve worker on PORT")
    parser.add_argument("--child", choices=("torch", "fp32", "int8"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.texts, args.repeat, args.out)
        return
    result: dict = {"load_average_start": [round(x, 2) for x in os.getloadavg()]}
    if args.texts:
        with tempfile.TemporaryDirectory() as folder:
            torch_figures, torch_vectors = run_child("torch", args.texts, args.repeat, Path(folder))
            result.update({"texts": args.texts, "torch": torch_figures})
            for precision in ("fp32", "int8"):
                figures, vectors = run_child(precision, args.texts, args.repeat, Path(folder))
                cosines = np.sum(torch_vectors * vectors, axis=1)
                result[f"onnx_{precision}"] = figures | {
                    "throughput_ratio": round(figures["texts_per_s"] / torch_figures["texts_per_s"], 2),
                    "mean_cosine": round(float(cosines.mean()), 6), "min_cosine": round(float(cosines.min()), 6)}
                print(precision, result[f"onnx_{precision}"], flush=True)
    if args.cli:
        result.update(time_cli(args.cli))
    if args.serve:
        result.update(measure_serve(args.serve, 20))
    result.update(machine_facts())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
