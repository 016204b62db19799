"""The chat widget's streams against a real `supportrag serve` (gunicorn gthread) on 127.0.0.1.

Run by hand:  python bench/widget_stream.py [--threads 32] [--questions 50] [--streams 50]
Starts the service on a throwaway embedded database (seeded with the default articles) twice: offline
(extractive answers in pieces) and with a streaming fake OpenAI-compatible model (tests/fake_openai.py, one
word every ``--word-delay`` seconds). For each it asks ``--questions`` questions one after another and measures the
time to the first answer text (the first ``delta`` event): p50 and p95. With the model it then keeps ``--streams``
answers open at once while it times ``GET /help``, and compares that p95 with the idle one.
Prints one JSON line per mode; lines go to artifacts/bench/widget.jsonl.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchlib import machine_facts, report  # noqa: E402
from tests.fake_openai import FakeOpenAIServer  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "widget.jsonl"
TOPICS = ["I never got the password reset email", "How do I get a refund for my order?",
          "Which payment methods do you accept?", "Where is my package? I want to track my order",
          "The website does not load in my browser", "Can I pay with PayPal?", "How long does a refund take?",
          "My reset link has expired", "The tracking number does not work", "The page shows a blank screen"]
QUESTIONS = [f"{prefix}{topic}" for prefix in ("", "Hi, ", "Hello! ", "Quick question: ", "Please help: ")
             for topic in TOPICS]
REPLY = "Open the link in the article, follow the steps it lists, and write to us if it still fails [1]."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))], 1)


def start_server(data_dir: Path, threads: int, extra: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "SUPPORTRAG_DATA_DIR": str(data_dir), "SUPPORTRAG_RATE_LIMIT_WIDGET": "off", **extra}
    env.pop("DATABASE_URL", None)
    log = open(data_dir / f"server-{port}.log", "wb")
    process = subprocess.Popen([str(Path(sys.executable).parent / "supportrag"), "serve", "--port", str(port),
                                "--threads", str(threads)], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5):
                return process, base
        except OSError:
            time.sleep(0.25)
    raise SystemExit(f"server did not start; see {log.name}")


def new_token(base: str) -> str:
    request = urllib.request.Request(f"{base}/widget/api/session", data=b'{"locale": "en"}', method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["token"]


def ask(base: str, token: str, question: str, opened: threading.Event | None = None) -> tuple[float, float]:
    """(ms to the first delta event, ms to the end of the stream); ``opened`` is set at the first delta."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    started = time.perf_counter()
    connection.request("POST", "/widget/api/ask", json.dumps({"question": question}),
                       {"Content-Type": "application/json", "X-Widget-Token": token})
    response = connection.getresponse()
    first = None
    while line := response.readline():
        if first is None and line.startswith(b"event: delta"):
            first = (time.perf_counter() - started) * 1000
            if opened is not None:
                opened.set()
    connection.close()
    return first or float("nan"), (time.perf_counter() - started) * 1000


def help_latencies(base: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        with urllib.request.urlopen(f"{base}/help", timeout=60) as response:
            response.read()
        times.append((time.perf_counter() - started) * 1000)
    return times


def first_text(base: str, questions: int) -> dict[str, float]:
    token = new_token(base)
    for question in QUESTIONS[:3]:
        ask(base, token, question)  # warm up: model loaded in every worker
    firsts = [ask(base, new_token(base), QUESTIONS[i % len(QUESTIONS)])[0] for i in range(questions)]
    return {"first_text_ms_p50": percentile(firsts, 0.5), "first_text_ms_p95": percentile(firsts, 0.95)}


def under_streams(base: str, streams: int, samples: int) -> dict[str, float]:
    """Open ``streams`` slow answers at once; once every one has sent text, time the help page while they stay
    open (the answers last far longer than the sampling)."""
    idle = help_latencies(base, samples)
    tokens = [new_token(base) for _ in range(streams)]
    opened = [threading.Event() for _ in tokens]
    done: list[float] = []
    workers = [threading.Thread(target=lambda t=t, i=i: done.append(ask(base, t, QUESTIONS[i % len(QUESTIONS)],
                                                                        opened[i])[1]), daemon=True)
               for i, t in enumerate(tokens)]
    for worker in workers:
        worker.start()
    for event in opened:
        event.wait(timeout=120)
    open_at_start = sum(event.is_set() for event in opened) - len(done)
    loaded = help_latencies(base, samples)
    open_at_end = streams - len(done)
    for worker in workers:
        worker.join()
    idle_p95, loaded_p95 = percentile(idle, 0.95), percentile(loaded, 0.95)
    return {"streams": streams, "open_when_sampling_began": open_at_start, "open_when_sampling_ended": open_at_end,
            "help_ms_p50_idle": percentile(idle, 0.5), "help_ms_p95_idle": idle_p95,
            "help_ms_p50_streaming": percentile(loaded, 0.5), "help_ms_p95_streaming": loaded_p95,
            "ratio_p95": round(loaded_p95 / idle_p95, 2), "stream_ms_p50": percentile(done, 0.5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=32, help="gunicorn threads per worker (serve --threads)")
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--help-samples", type=int, default=100)
    parser.add_argument("--word-delay", type=float, default=0.05, help="the fake model's seconds per word")
    parser.add_argument("--open-word-delay", type=float, default=0.6,
                        help="seconds per word while the concurrent streams are held open")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="widget-bench-") as folder, FakeOpenAIServer() as model:
        model.state.chat_reply, model.state.stream_delay = REPLY, args.word_delay
        data_dir = Path(folder)
        for mode, extra in (("extractive", {}), ("streaming model", {"LLM_BASE_URL": model.base_url,
                                                                    "LLM_MODEL": "fake-stream"})):
            process, base = start_server(data_dir, args.threads, extra)
            try:
                result = {"bench": "widget_stream", "mode": mode, "threads": args.threads,
                          "questions": args.questions, **first_text(base, args.questions)}
                if mode == "streaming model":
                    model.state.stream_delay = args.open_word_delay  # answers that stay open for seconds
                    result |= {"word_delay_s": args.word_delay, "open_word_delay_s": args.open_word_delay,
                               **under_streams(base, args.streams, args.help_samples)}
                report(RESULTS, result | machine_facts())
            finally:
                process.terminate()
                process.wait(timeout=60)


if __name__ == "__main__":
    main()
