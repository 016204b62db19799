"""HTTP search throughput: POST /api/search against a real `supportrag serve` on 127.0.0.1, exact vs approximate.

Run by hand:  python bench/http_load.py --articles 8000 --sections-per-article 5 --seconds 15 --real
Loads a corpus into a fresh database on the embedded server with bench/search.py's loader (rows as the service
stores them, under the local MiniLM's model name so the service searches them): either real embeddings
(``--real``: MiniLM vectors of real short texts grouped into articles; the questions are held-out texts of the
same source, which the server embeds itself) or clustered vectors around the real MiniLM vectors of ``TOPICS``
(the questions are about those topics). Then starts `supportrag serve` twice on that database, once with the
default exact search and once with the opt-in approximate mode (SEARCH_APPROXIMATE=1, after
``supportrag db hnsw``'s indexes are built; ``--mode vector`` only: the approximate mode is vector mode's), and
for each of ``--clients`` concurrent clients posts questions for ``--seconds``: req/s, p50/p99 latency, errors.
Prints one JSON line per run and a summary; appends the summary to bench/results/http.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
import sqlalchemy as sa
from benchlib import report
from search import RealVectorSource, SyntheticVectors, load
from pgvector.psycopg import register_vector
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import create_engine, resolve_database_url
from service.db.migrate import upgrade_database
from service.providers.embeddings import LocalEmbedder, embed_narrow
from service.retrieval.approximate import build_approximate_index

RESULTS = Path(__file__).resolve().parent / "results" / "http.jsonl"
TOPICS = ["reset my password", "refund for a damaged item", "track my order", "change shipping address",
          "cancel my subscription", "update credit card", "download an invoice", "two-factor authentication",
          "delete my account", "export my data", "add a team member", "upgrade my plan", "return policy",
          "gift card balance", "international shipping", "login link expired"]
QUESTIONS = [f"{prefix} {topic}" for topic in TOPICS for prefix in ("how do I", "help:", "cannot")]


class TopicVectors(SyntheticVectors):
    """Vectors around the real MiniLM vectors of ``TOPICS``: the questions asked land in clusters."""

    def __init__(self, rng: np.random.Generator, embedder: LocalEmbedder) -> None:
        super().__init__(rng, embed_narrow(embedder, TOPICS))
        self.query_texts = QUESTIONS

    def cards(self, start: int, count: int) -> np.ndarray:
        return self.near(count)

    def sections(self, start: int, count: int, per_article: int) -> np.ndarray:
        return self.near(count * per_article)

    def near(self, count: int) -> np.ndarray:
        vectors = self.centres[self.rng.integers(0, len(self.centres), count)]
        vectors = vectors + 0.6 * self.rng.standard_normal((count, 384)) / 20
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def load_corpus(url: str, args: argparse.Namespace, embedder: LocalEmbedder) -> list[str]:
    """The corpus through COPY … FORMAT BINARY, the approximate mode's indexes; returns the questions to ask."""
    rng = np.random.default_rng(3)
    source = (RealVectorSource(args.articles, args.sections_per_article, 200, seed=7) if args.real
              else TopicVectors(rng, embedder))
    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo) as conn:
        register_vector(conn)
        load(conn, rng, args.articles, args.sections_per_article, source, datetime.now(timezone.utc),
             model=embedder.model_name)
        conn.execute("INSERT INTO app_state (key, value) VALUES ('seeded', 'bench') ON CONFLICT DO NOTHING")
        conn.commit()
    engine = create_engine(url, pool_size=1)
    with Session(engine) as session:
        build_approximate_index(session, embedder.model_name)
        session.commit()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE knowledge_base"))
        conn.execute(sa.text("VACUUM ANALYZE knowledge_sections"))
    engine.dispose()
    return list(source.query_texts)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(url: str, extra_env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`supportrag serve` on a free port; returns once /healthz answers."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "PORT": str(port), "SUPPORTRAG_AUTO_SEED": "0", **extra_env}
    process = subprocess.Popen([sys.executable, "-c", "from service.cli.main import main; main()", "serve"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                return process, base
        except OSError:
            time.sleep(0.5)
    process.terminate()
    raise RuntimeError("server did not start")


def post_search(base: str, question: str) -> bool:
    request = urllib.request.Request(f"{base}/api/search", data=json.dumps({"query": question, "limit": 3}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status == 200
    except OSError:
        return False


def post_search_count(base: str, question: str) -> int:
    """How many results one search returns (a corpus the service cannot see returns none, fast)."""
    request = urllib.request.Request(f"{base}/api/search", data=json.dumps({"query": question, "limit": 3}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return len(json.loads(response.read())["results"])


def load_test(base: str, clients: int, seconds: float, questions: list[str]) -> dict:
    """``clients`` threads posting questions back to back for ``seconds``."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(offset: int) -> None:
        index = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            ok = post_search(base, questions[index % len(questions)])
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)
                errors[0] += 0 if ok else 1
            index += 7

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"clients": clients, "requests": len(latencies), "req_per_s": round(len(latencies) / seconds, 1),
            "p50_ms": round(statistics.median(latencies), 1),
            "p99_ms": round(float(np.percentile(latencies, 99)), 1), "errors": errors[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--sections-per-article", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--real", action="store_true", help="real text embeddings and held-out real questions")
    parser.add_argument("--mode", choices=("vector", "lexical", "hybrid"), default=Settings().retrieval_mode,
                        help="RETRIEVAL_MODE of the servers (default: the service's). The approximate mode exists "
                             "in vector mode only, so other modes time the exact search alone")
    args = parser.parse_args()
    base_url = resolve_database_url(Settings.from_env())
    name = f"bench_http_{uuid.uuid4().hex[:8]}"
    admin = sa.make_url(base_url).set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = sa.make_url(base_url).set(database=name).render_as_string(hide_password=False)
    summary: dict = {"articles": args.articles, "sections": args.articles * args.sections_per_article,
                     "data": "real" if args.real else "topics", "mode": args.mode}
    strategies = [("exact", {})]
    if args.mode == "vector":
        strategies.append(("approximate", {"SEARCH_APPROXIMATE": "1"}))
    try:
        engine = create_engine(url, pool_size=1)
        upgrade_database(engine)
        engine.dispose()
        questions = load_corpus(url, args, LocalEmbedder())
        for strategy, env in strategies:
            process, base = start_server(url, {"RETRIEVAL_MODE": args.mode, **env})
            try:
                for question in questions:  # warm: every worker's model and cache, the table in memory
                    post_search(base, question)
                assert post_search_count(base, questions[0]) == 3, "the corpus is not searchable"
                for clients in (int(c) for c in args.clients.split(",")):
                    run = {"strategy": strategy, **load_test(base, clients, args.seconds, questions)}
                    print(json.dumps(run), flush=True)
                    summary[f"{strategy}_{clients}_clients"] = run
            finally:
                process.terminate()
                process.wait(timeout=30)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    eight = "8_clients"
    if f"exact_{eight}" in summary and f"approximate_{eight}" in summary:
        summary["approximate_vs_exact_req_per_s_8_clients"] = round(
            summary[f"approximate_{eight}"]["req_per_s"] / max(summary[f"exact_{eight}"]["req_per_s"], 0.1), 1)
    summary.update({"seconds": args.seconds, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "date": datetime.now(timezone.utc).date().isoformat()})
    report(RESULTS, summary)


if __name__ == "__main__":
    main()
