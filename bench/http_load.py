"""HTTP search throughput: POST /api/search against a real `supportrag serve` on 127.0.0.1, exact scan vs index walk.

Run by hand:  python bench/http_load.py --articles 20000 --sections-per-article 5 --seconds 20
Loads a corpus into a fresh database on the embedded server: clustered unit vectors whose cluster centres are the
real MiniLM vectors of ``TOPICS`` (so that the questions asked land in clusters, as ticket subjects do), stored
as MiniLM's so the service searches them. Then starts `supportrag serve` twice on that database, once with the
exact scan (SEARCH_WALK_BUDGET=0: the service before the walk) and once with the exact walk (the
default settings, after ``supportrag db cluster``'s training), and for 1, 8 and 32 concurrent clients posts
questions for ``--seconds`` each: req/s, p50/p99 latency, errors. Prints one JSON line per run and a summary; appends the summary to
bench/results/http.jsonl.
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
import sqlalchemy as sa
from benchlib import report
from pgvector.psycopg import register_vector
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.engine import create_engine, resolve_database_url
from service.db.migrate import upgrade_database
from service.knowledge.clusters import train_clusters, vacuum_vector_tables
from service.providers.embeddings import LocalEmbedder, embed_padded

RESULTS = Path(__file__).resolve().parent / "results" / "http.jsonl"
TOPICS = ["reset my password", "refund for a damaged item", "track my order", "change shipping address",
          "cancel my subscription", "update credit card", "download an invoice", "two-factor authentication",
          "delete my account", "export my data", "add a team member", "upgrade my plan", "return policy",
          "gift card balance", "international shipping", "login link expired"]
QUESTIONS = [f"{prefix} {topic}" for topic in TOPICS for prefix in ("how do I", "help:", "cannot")]


def load_corpus(url: str, articles: int, per_article: int, embedder: LocalEmbedder) -> None:
    """Articles and sections around the topics' real vectors, through COPY … FORMAT BINARY, then the indexes."""
    rng = np.random.default_rng(3)
    centres = embed_padded(embedder, TOPICS)[:, :384]
    now = datetime.now(timezone.utc)

    def near(count: int) -> np.ndarray:
        vectors = centres[rng.integers(0, len(centres), count)] + 0.6 * rng.standard_normal((count, 384)) / 20
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.pad(vectors.astype(np.float32), ((0, 0), (0, 1536 - 384)))

    with psycopg.connect(sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        register_vector(conn)
        with conn.cursor().copy("COPY knowledge_base (id, title, content, embedding, embedding_model, importance, "
                                "created_at) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "text", "vector", "text", "float8", "timestamptz"])
            for i, card in enumerate(near(articles)):
                copy.write_row((i + 1, f"article {i}", f"content {i}", card, embedder.model_name,
                                float(rng.uniform(0, 2)), now - timedelta(days=float(rng.uniform(0, 730)))))
        with conn.cursor().copy("COPY knowledge_sections (article_id, ordinal, content, char_start, char_end, "
                                "content_sha256, embedding, embedding_model) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int4", "text", "int4", "int4", "text", "vector", "text"])
            for start in range(0, articles, 10_000):
                chunk = min(10_000, articles - start)
                vectors = near(chunk * per_article)
                for i in range(chunk):
                    for j in range(per_article):
                        copy.write_row((start + i + 1, j, f"section {j}", 0, 1, "x", vectors[i * per_article + j],
                                        embedder.model_name))
        conn.execute("INSERT INTO app_state (key, value) VALUES ('seeded', 'bench') ON CONFLICT DO NOTHING")
        conn.commit()
    engine = create_engine(url, pool_size=1)
    with Session(engine) as session:
        train_clusters(session, embedder.model_name)
        session.commit()
    vacuum_vector_tables(engine)
    engine.dispose()


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


def load_test(base: str, clients: int, seconds: float) -> dict:
    """``clients`` threads posting questions back to back for ``seconds``."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(offset: int) -> None:
        index = offset
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            ok = post_search(base, QUESTIONS[index % len(QUESTIONS)])
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
    args = parser.parse_args()
    base_url = resolve_database_url(Settings.from_env())
    name = f"bench_http_{uuid.uuid4().hex[:8]}"
    admin = sa.make_url(base_url).set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = sa.make_url(base_url).set(database=name).render_as_string(hide_password=False)
    summary: dict = {"articles": args.articles, "sections": args.articles * args.sections_per_article}
    try:
        engine = create_engine(url, pool_size=1)
        upgrade_database(engine)
        engine.dispose()
        load_corpus(url, args.articles, args.sections_per_article, LocalEmbedder())
        for strategy, env in (("exact", {"SEARCH_WALK_BUDGET": "0"}), ("index", {"SEARCH_INDEX_MIN_ROWS": "0", "SEARCH_WALK_BUDGET": "20000"})):
            process, base = start_server(url, env)
            try:
                for question in QUESTIONS:  # warm: every worker's model and cache, the table in memory
                    post_search(base, question)
                assert post_search_count(base, QUESTIONS[0]) == 3, "the corpus is not searchable"
                for clients in (int(c) for c in args.clients.split(",")):
                    run = {"strategy": strategy, **load_test(base, clients, args.seconds)}
                    print(json.dumps(run), flush=True)
                    summary[f"{strategy}_{clients}_clients"] = run
            finally:
                process.terminate()
                process.wait(timeout=30)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    eight = "8_clients"
    if f"exact_{eight}" in summary and f"index_{eight}" in summary:
        summary["speedup_req_per_s_8_clients"] = round(
            summary[f"index_{eight}"]["req_per_s"] / max(summary[f"exact_{eight}"]["req_per_s"], 0.1), 1)
    summary.update({"seconds": args.seconds, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "date": datetime.now(timezone.utc).date().isoformat()})
    report(RESULTS, summary)


if __name__ == "__main__":
    main()
