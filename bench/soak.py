"""Soak: N concurrent customers submit tickets to a real ``supportrag serve`` for a bounded time, then the
database is checked: every acknowledged ticket stored, nothing stored twice or unacknowledged, no 5xx.

Run by hand:  python bench/soak.py [--clients 8] [--seconds 30] [--workers 2] [--error-rate 0.05]
Everything stays on 127.0.0.1: a throwaway embedded PostgreSQL, ``supportrag serve`` (gunicorn) on a free port,
and tests/fake_openai.py as the language model with a random latency per request and a share of 500s (the
service retries, then answers extractively). Embeddings are the local model. Rate limits are turned off:
this measures loss under load, not the limiter. Prints one JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from service.db.embedded import start_embedded_server  # noqa: E402
from tests.fake_openai import FakeOpenAIServer, _Handler  # noqa: E402

SUPPORTRAG = Path(sys.executable).parent / "supportrag"
BODIES = ["I forgot my password and cannot log in", "How do I get my money back?", "Do you take PayPal?",
          "Where is my package? It has not arrived.", "The website shows ERR_SSL_PROTOCOL_ERROR"]


class FlakyModelHandler(_Handler):
    """The fake server's chat endpoint with a random latency and a share of HTTP 500s."""

    latency: tuple[float, float] = (0.05, 0.5)
    error_rate = 0.05
    counts: Counter[str] = Counter()

    def do_POST(self) -> None:
        if self.path.endswith("/chat/completions"):
            time.sleep(random.uniform(*self.latency))
            if random.random() < self.error_rate:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.counts["chat_500"] += 1
                self._send(500, {"error": {"message": "injected failure", "type": "server_error"}})
                return
            self.counts["chat_ok"] += 1
        super().do_POST()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post_ticket(base: str, subject: str) -> tuple[int | str, float, int | None]:
    """(status or error name, seconds, ticket id if acknowledged)."""
    data = json.dumps({"subject": subject, "body": random.choice(BODIES)}).encode()
    request = urllib.request.Request(f"{base}/api/tickets", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
            return response.status, time.perf_counter() - started, body["ticket"]["id"]
    except urllib.error.HTTPError as error:
        with error:
            error.read()
        return error.code, time.perf_counter() - started, None
    except OSError as error:  # connection refused or reset, timeout: counted, never hidden
        return type(error).__name__, time.perf_counter() - started, None


def wait_healthy(base: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("serve did not become healthy")


def warm_up(base: str, args: argparse.Namespace) -> None:
    """Searches from every client for a few seconds, so each worker has loaded the embedding model."""
    deadline = time.monotonic() + args.warmup_seconds

    def searcher() -> None:
        while time.monotonic() < deadline:
            request = urllib.request.Request(f"{base}/api/search", data=b'{"query": "refund"}', method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as response:
                response.read()

    threads = [threading.Thread(target=searcher) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start everything, submit for ``args.seconds``, stop, and compare what was acknowledged with what is stored."""
    workdir = Path(tempfile.mkdtemp(prefix="supportrag-soak-"))
    url = start_embedded_server(workdir / "pgdata", database="soak", delete_on_exit=True)
    FlakyModelHandler.latency, FlakyModelHandler.error_rate = (args.min_latency, args.max_latency), args.error_rate
    model = FakeOpenAIServer()
    model.RequestHandlerClass = FlakyModelHandler
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "SUPPORTRAG_DATA_DIR": str(workdir), "LLM_BASE_URL": model.base_url,
           "LLM_API_KEY": "soak", "LLM_TIMEOUT": "10", "SUPPORTRAG_RATE_LIMIT_TICKETS": "off",
           "WEB_CONCURRENCY": str(args.workers)}
    for name in ("EMBEDDING_PROVIDER", "EMBEDDING_API_KEY", "EMBEDDING_BASE_URL", "RETRIEVAL_MODE"):
        env.pop(name, None)
    results: list[tuple[str, int | str, float, int | None]] = []
    lock = threading.Lock()
    with model, open(workdir / "serve.log", "wb") as log, subprocess.Popen(
            [str(SUPPORTRAG), "serve", "--port", str(port), "--threads", str(args.threads)], env=env, stdout=log,
            stderr=subprocess.STDOUT) as process:
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base, process)
            warm_up(base, args)
            deadline = time.monotonic() + args.seconds

            def customer(n: int) -> None:
                i = 0
                while time.monotonic() < deadline:
                    i += 1
                    subject = f"soak-{n}-{i}"
                    status, seconds, ticket_id = post_ticket(base, subject)
                    with lock:
                        results.append((subject, status, seconds, ticket_id))

            started = time.monotonic()
            threads = [threading.Thread(target=customer, args=(n,)) for n in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
        finally:
            process.terminate()
            process.wait(60)
    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute("SELECT t.subject, t.id, a.mode, a.llm_ms, a.retrieval_ms FROM tickets t "
                            "LEFT JOIN LATERAL (SELECT mode, llm_ms, retrieval_ms FROM ticket_answers "
                            "WHERE ticket_id = t.id "
                            "ORDER BY id DESC LIMIT 1) a ON true WHERE t.subject LIKE 'soak-%'").fetchall()
    acknowledged = {subject: ticket_id for subject, status, _, ticket_id in results if status == 201}
    stored = Counter(row[0] for row in rows)
    llm_ms = [row[3] for row in rows if row[3] is not None]
    retrieval_ms = [row[4] for row in rows if row[4] is not None]
    statuses = Counter(str(status) for _, status, _, _ in results)
    latencies = [seconds for _, status, seconds, _ in results if status == 201]
    return {
        "clients": args.clients, "seconds": round(elapsed, 1), "warmup_seconds": args.warmup_seconds, "gunicorn_workers": args.workers,
        "llm_latency_s": [args.min_latency, args.max_latency], "llm_error_rate": args.error_rate,
        "requests": len(results), "statuses": dict(statuses),
        "acknowledged": len(acknowledged), "stored": sum(stored.values()),
        "acknowledged_equals_stored": set(acknowledged) == set(stored) and acknowledged.keys() == stored.keys(),
        "acknowledged_missing": len(set(acknowledged) - set(stored)),
        "stored_unacknowledged": len(set(stored) - set(acknowledged)),
        "duplicates": sum(count - 1 for count in stored.values() if count > 1),
        "responses_5xx": sum(count for status, count in statuses.items() if status.isdigit() and int(status) >= 500),
        "connection_errors": sum(count for status, count in statuses.items() if not status.isdigit()),
        "answer_modes": dict(Counter(row[2] for row in rows)),
        "server_llm_ms": {"p50": round(percentile(llm_ms, 0.5)), "p99": round(percentile(llm_ms, 0.99))},
        "server_retrieval_ms": {"p50": round(percentile(retrieval_ms, 0.5)),
                                "p99": round(percentile(retrieval_ms, 0.99))},
        "model_requests": dict(FlakyModelHandler.counts),
        "throughput_per_s": round(len(latencies) / elapsed, 2),
        "latency_ms": {"p50": round(percentile(latencies, 0.50) * 1000), "p95": round(percentile(latencies, 0.95) * 1000),
                       "p99": round(percentile(latencies, 0.99) * 1000), "max": round(max(latencies, default=0) * 1000)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument("--warmup-seconds", type=float, default=10, help="searches first (model loading)")
    parser.add_argument("--min-latency", type=float, default=0.05)
    parser.add_argument("--max-latency", type=float, default=0.5)
    parser.add_argument("--error-rate", type=float, default=0.05)
    summary = run(parser.parse_args())
    print(json.dumps(summary, indent=2))
    ok = summary["acknowledged_equals_stored"] and not summary["duplicates"] and not summary["responses_5xx"]
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
