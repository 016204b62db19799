"""Similar solved tickets (issue 25 item 3): how often a paraphrased question finds its own earlier solved ticket.

Run by hand:  SUPPORTRAG_DATA_DIR=/tmp/similar-bench python bench/similar_recall.py [--shared ../shared]

On ../shared/eval/stackfaq_dev (125 threads: a question and its answers; 50 threads have user-written paraphrases
of their question): every thread becomes one solved ticket, in a throwaway schema. For a thread with paraphrases
the solved ticket's question is its first paraphrase; for the others it is the thread's title. The agent's
reply that solved it is the thread's first answer. Each other paraphrase is then a new ticket: the service's own
path (the question embedded as the service embeds it, ``find_similar_tickets`` over ``ticket_vectors``, the
solving replies joined) lists the similar solved tickets, and we count how often the paraphrase's own thread is
first (recall@1) or in the first three (recall@3).

Baseline in the same run: word overlap (Jaccard of lower-cased words) between the new question and each solved
one, best first. Timings: the service's query per new ticket against a brute-force NumPy scan of the same vectors.
Also a sweep of SIMILAR_TICKET_MIN_SIMILARITY: a draft grounds on the first similar ticket only at or above it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from service.config import Settings
from service.db.migrate import throwaway_schema
from service.db.models import Ticket, TicketMessage
from service.retrieval.evaluation import load_eval_set
from service.runtime import Runtime
from service.tickets.answering import ticket_query
from service.tickets.helpdesk import ticket_fields
from service.tickets.similar import similar_tickets_for_vector, store_ticket_vector

from benchlib import report

HERE = Path(__file__).resolve().parent
WORD = re.compile(r"\w+")


def thread_of(item_id: str) -> str:
    return item_id.split("_")[0]


def build(eval_set) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(solved tickets: thread, question, reply), (new tickets: thread, question)."""
    answers: dict[str, list[dict]] = defaultdict(list)
    for doc in eval_set.corpus:
        answers[thread_of(doc["id"])].append(doc)
    paraphrases: dict[str, list[str]] = defaultdict(list)
    for query in sorted(eval_set.queries, key=lambda q: q["id"]):
        paraphrases[thread_of(query["id"])].append(query["text"])
    solved, new = [], []
    for thread in sorted(answers):
        asked = paraphrases.get(thread, [])
        solved.append((thread, asked[0] if asked else answers[thread][0]["title"], answers[thread][0]["text"]))
        new += [(thread, text) for text in asked[1:]]
    return solved, new


def load_solved(runtime: Runtime, solved: list[tuple[str, str, str]]) -> dict[int, str]:
    """Store the solved tickets with their replies and vectors; ticket id → thread."""
    threads = {}
    with runtime.session() as session:
        tickets = []
        for thread, question, reply in solved:
            ticket = Ticket(**ticket_fields(question), status="answered", state="solved", solved_by="agent")
            session.add(ticket)
            tickets.append((ticket, thread, reply))
        session.flush()
        vectors = runtime.embedder.embed([ticket_query(t.subject, t.body) for t, _, _ in tickets])
        for (ticket, thread, reply), vector in zip(tickets, vectors):
            session.add(TicketMessage(ticket_id=ticket.id, kind="agent_reply", body=reply, channel="web"))
            store_ticket_vector(session, ticket, vector, runtime.embedder.model_name)
            threads[ticket.id] = thread
    return threads


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    args = parser.parse_args()
    dev = args.shared / "eval" / "stackfaq_dev"
    eval_set = load_eval_set(dev / "corpus.jsonl", dev / "queries.jsonl", dev / "qrels.tsv")
    solved, new = build(eval_set)
    base = Runtime.start(Settings.from_env(), seed=False)
    load = os.getloadavg()
    with throwaway_schema(base.engine.url.render_as_string(hide_password=False), "supportrag_similar") as engine:
        runtime = Runtime(base.settings, engine, base.embedder)
        threads = load_solved(runtime, solved)
        model = runtime.embedder.model_name
        new_vectors = runtime.embedder.embed(
            [ticket_query(f["subject"], f["body"]) for f in (ticket_fields(q) for _, q in new)])
        hits1 = hits3 = 0
        top1 = []  # (similarity, right)
        service_ms = []
        with runtime.session() as session:
            for (thread, _), vector in zip(new, new_vectors):
                started = time.perf_counter()
                found = similar_tickets_for_vector(session, vector, model=model, limit=3)
                service_ms.append((time.perf_counter() - started) * 1000)
                ranked = [threads[t.ticket_id] for t in found]
                hits1 += ranked[:1] == [thread]
                hits3 += thread in ranked[:3]
                top1.append((found[0].similarity, ranked[0] == thread))
    solved_vectors = runtime.embedder.embed([ticket_query(**ticket_fields(q)) for _, q, _ in solved])
    solved_vectors /= np.linalg.norm(solved_vectors, axis=1, keepdims=True)
    brute_ms, base1, base3 = [], 0, 0
    solved_words = [words(q) for _, q, _ in solved]
    for (thread, question), vector in zip(new, new_vectors):
        started = time.perf_counter()
        order = np.argsort(-(solved_vectors @ (vector / np.linalg.norm(vector))))[:3]
        brute_ms.append((time.perf_counter() - started) * 1000)
        asked = words(question)
        overlap = sorted(range(len(solved)), key=lambda i: -len(asked & solved_words[i]) / len(asked | solved_words[i]))
        base1 += solved[overlap[0]][0] == thread
        base3 += thread in [solved[i][0] for i in overlap[:3]]
        assert len(order) == 3
    total = len(new)
    sweep = [{"threshold": t / 100, "grounded_right": sum(1 for s, r in top1 if s >= t / 100 and r),
              "grounded_wrong": sum(1 for s, r in top1 if s >= t / 100 and not r)} for t in range(50, 96, 5)]
    result = {
        "bench": "similar_recall", "model": model, "solved_tickets": len(solved), "new_tickets": total,
        "recall_at_1": hits1, "recall_at_3": hits3, "baseline_word_overlap_at_1": base1,
        "baseline_word_overlap_at_3": base3,
        "service_ms_p50": round(statistics.median(service_ms), 3),
        "numpy_scan_ms_p50": round(statistics.median(brute_ms), 3),
        "loadavg": [round(x, 2) for x in load], "threshold_sweep": sweep,
    }
    print(f"{len(solved)} solved tickets, {total} new paraphrased tickets; load average {load[0]:.2f}")
    print(f"/similar finds its own solved ticket first: {hits1}/{total} ({hits1 / total:.1%}), "
          f"in the first three: {hits3}/{total} ({hits3 / total:.1%})")
    print(f"word-overlap baseline: @1 {base1}/{total} ({base1 / total:.1%}), @3 {base3}/{total} ({base3 / total:.1%})")
    print(f"query p50: service {result['service_ms_p50']} ms (SQL + replies), NumPy scan {result['numpy_scan_ms_p50']} ms")
    print(f"{'threshold':>9}  {'grounds on the right ticket':>28}  {'grounds on a wrong one':>23}")
    for row in sweep:
        print(f"{row['threshold']:9.2f}  {row['grounded_right']:20d} / {total:<5d}  {row['grounded_wrong']:15d} / {total}")
    report(HERE / "results" / "similar_recall.jsonl", result)


if __name__ == "__main__":
    main()
