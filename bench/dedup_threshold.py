"""Tune CANDIDATE_DEDUP_THRESHOLD on the stackfaq dev set: when is a candidate sent to "add to" a section?

Run by hand:  SUPPORTRAG_DATA_DIR=/tmp/dedup-bench python bench/dedup_threshold.py [--shared ../shared]

The dev set has 125 threads (a question and its answers); 50 of them have user-written paraphrases of their
question (499 queries). A fixed shuffle splits those 50 into two halves:
- covered: in the knowledge base, minus one held-out answer each. A candidate made from one of its paraphrases
  (the candidate's question) and the held-out answer (the agent's reply) duplicates that thread's section:
  correct is "add to" that very section.
- not covered: left out of the knowledge base. A candidate from its paraphrase and one of its answers is new
  knowledge: "add to" anything is a false "add to".
The other 75 threads are always in the knowledge base, as distractors. Threads become sections of long articles,
five to an article (`## <question>` and its answers), as in stackfaq_long_dev. Each candidate goes through the
service's own steps: scrubbing, the template body, the dedup text, the nearest text section by pgvector.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

import numpy as np

from service.config import Settings
from service.knowledge.candidates import dedup_text, nearest_section
from service.knowledge.scrubbing import candidate_title, scrub_personal_data, template_body
from service.providers.embeddings import embed_narrow
from service.retrieval.evaluation import load_eval_set, throwaway_corpus
from service.runtime import Runtime

from benchlib import report

HERE = Path(__file__).resolve().parent
SEED = 20
THREADS_PER_ARTICLE = 5


def thread_of(item_id: str) -> str:
    return item_id.split("_")[0]


def build(eval_set) -> tuple[list[dict], list[tuple[str, str, str, bool]]]:
    """The knowledge base (articles) and the candidates: (question, reply, thread, covered)."""
    answers: dict[str, list[dict]] = defaultdict(list)
    for doc in eval_set.corpus:
        answers[thread_of(doc["id"])].append(doc)
    queried = sorted({thread_of(q["id"]) for q in eval_set.queries if len(answers[thread_of(q["id"])]) >= 2})
    random.Random(SEED).shuffle(queried)
    covered, uncovered = set(queried[: len(queried) // 2]), set(queried[len(queried) // 2:])
    held_out = {t: answers[t][-1] for t in covered}
    in_kb = [t for t in sorted(answers) if t not in uncovered]
    articles = []
    for start in range(0, len(in_kb), THREADS_PER_ARTICLE):
        parts = []
        for t in in_kb[start:start + THREADS_PER_ARTICLE]:
            kept = [a["text"] for a in answers[t] if a is not held_out.get(t)]
            parts.append(f"## {answers[t][0]['title']}\n\n" + "\n\n".join(kept))
        articles.append({"id": f"part{start // THREADS_PER_ARTICLE}",
                         "title": f"Frequently asked questions, part {start // THREADS_PER_ARTICLE + 1}",
                         "text": "\n\n".join(parts)})
    candidates = []
    for q in eval_set.queries:
        t = thread_of(q["id"])
        if t in covered:
            candidates.append((q["text"], held_out[t]["text"], answers[t][0]["title"], True))
        elif t in uncovered:
            candidates.append((q["text"], answers[t][-1]["text"], answers[t][0]["title"], False))
    return articles, candidates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    args = parser.parse_args()
    dev = args.shared / "eval" / "stackfaq_dev"
    eval_set = load_eval_set(dev / "corpus.jsonl", dev / "queries.jsonl", dev / "qrels.tsv")
    articles, candidates = build(eval_set)
    runtime = Runtime.start(Settings.from_env(), seed=False)
    texts = []
    for question, reply, _, _ in candidates:
        title = candidate_title(scrub_personal_data(question))
        texts.append(dedup_text(title, template_body([scrub_personal_data(reply)])))
    rows = []
    with throwaway_corpus(runtime, articles) as (kb, _):
        vectors = embed_narrow(kb.embedder, texts)
        with kb.session() as session:
            for (question, _, thread_title, covered), vector in zip(candidates, vectors):
                nearest = nearest_section(session, vector, kb.embedder.model_name)
                right = nearest is not None and nearest.heading_path[-1:] == (thread_title,)
                rows.append((covered, nearest.similarity, right))
    positives = [r for r in rows if r[0]]
    negatives = [r for r in rows if not r[0]]
    print(f"{len(positives)} candidates duplicating a covered thread, {len(negatives)} from threads not covered; "
          f"nearest section is the right one for {sum(r[2] for r in positives)} of {len(positives)}")
    print(f"{'threshold':>9}  {'correct add to':>16}  {'add to, wrong section':>22}  {'false add to':>14}")
    sweep = []
    for step in range(40, 91, 2):
        threshold = step / 100
        correct = sum(1 for _, s, right in positives if s >= threshold and right)
        wrong = sum(1 for _, s, right in positives if s >= threshold and not right)
        false = sum(1 for _, s, _ in negatives if s >= threshold)
        sweep.append({"threshold": threshold, "correct_add_to": correct, "wrong_section": wrong,
                      "false_add_to": false})
        print(f"{threshold:9.2f}  {correct:7d} / {len(positives):<6d}  {wrong:22d}  {false:6d} / {len(negatives):<5d}")
    also_asked = also_asked_sweep(runtime, eval_set)
    report(HERE / "results" / "dedup_threshold.jsonl", {
        "bench": "dedup_threshold", "model": runtime.embedder.model_name, "positives": len(positives),
        "negatives": len(negatives), "sweep": sweep, "also_asked": also_asked})


def also_asked_sweep(runtime: Runtime, eval_set) -> list[dict]:
    """CANDIDATE_ALSO_ASKED_THRESHOLD: question pairs of one thread (paraphrases: group them) against pairs of
    different threads (do not), by the cosine of the questions alone, as "also asked" compares them."""
    questions = [q["text"] for q in eval_set.queries]
    threads = np.array([thread_of(q["id"]) for q in eval_set.queries])
    vectors = embed_narrow(runtime.embedder, questions)
    similarity = vectors @ vectors.T
    upper = np.triu(np.ones_like(similarity, dtype=bool), k=1)
    same = similarity[upper & (threads[:, None] == threads[None, :])]
    other = similarity[upper & (threads[:, None] != threads[None, :])]
    print(f"\nalso asked: {len(same)} question pairs of one thread, {len(other)} of different threads")
    print(f"{'threshold':>9}  {'same thread grouped':>20}  {'different threads grouped':>26}")
    rows = []
    for step in range(50, 91, 5):
        threshold = step / 100
        rows.append({"threshold": threshold, "same": float((same >= threshold).mean()),
                     "other": float((other >= threshold).mean())})
        print(f"{threshold:9.2f}  {rows[-1]['same']:20.3f}  {rows[-1]['other']:26.4f}")
    return rows


if __name__ == "__main__":
    main()
