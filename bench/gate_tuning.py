"""Tune the answerability gate (ANSWER_MIN_SIMILARITY) on the stackfaq dev set and off-topic questions.

The search is the one the environment configures (RETRIEVAL_MODE, FUSION_METHOD, HYBRID_VECTOR_WEIGHT): the gate
reads the cosine of what that search returns. Vectors are cached on disk (bench/embedding_cache.py).

Run by hand:  python bench/gate_tuning.py [--shared ../shared]
Loads the dev corpus into a throwaway schema, sends every dev query and every
question of bench/data/offtopic_questions.txt through the service's search, and
prints, for each floor, the share of dev queries still answered and the share of
off-topic questions handed off. It does the same against the five seed articles
with a few everyday support questions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from service.config import Settings
from service.knowledge.seeding import load_seed_articles
from service.retrieval.evaluation import load_eval_set, throwaway_corpus
from service.retrieval.search import search_knowledge
from service.runtime import Runtime
from service.tickets.workflow import CONTEXT_ARTICLES

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from embedding_cache import DiskCachedEmbedder  # noqa: E402  (a sibling script, not a package)

SUPPORT_QUESTIONS = [
    "I forgot my password", "How do I get my money back?", "Where is my package?", "Do you take PayPal?",
    "The site won't load", "My card was declined", "I can't log in", "Can I return a damaged item for a refund?",
]


def top_similarities(runtime: Runtime, texts: list[str]) -> list[float]:
    """What the ticket gate reads: the best cosine among the articles a ticket retrieves."""
    with runtime.session() as session:
        return [max(r.similarity for r in search_knowledge(session, runtime.embedder, text, limit=CONTEXT_ARTICLES,
                                                           weights=runtime.weights, retrieval=runtime.retrieval))
                for text in texts]


def table(on_topic: list[float], off_topic: list[float], floors: list[float], labels: tuple[str, str]) -> None:
    print(f"{'floor':>6}  {labels[0]:>22}  {labels[1]:>26}")
    for floor in floors:
        answered = sum(s >= floor for s in on_topic) / len(on_topic)
        handed_off = sum(s < floor for s in off_topic) / len(off_topic)
        print(f"{floor:6.2f}  {answered:22.3f}  {handed_off:26.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", type=Path, default=HERE.parent.parent / "shared")
    args = parser.parse_args()
    dev = args.shared / "eval" / "stackfaq_dev"
    eval_set = load_eval_set(dev / "corpus.jsonl", dev / "queries.jsonl", dev / "qrels.tsv")
    off_topic = [line.strip() for line in (HERE / "data" / "offtopic_questions.txt").read_text().splitlines()
                 if line.strip()]
    started = Runtime.start(Settings.from_env(), seed=False)  # RETRIEVAL_MODE etc. choose the search measured
    runtime = Runtime(started.settings, started.engine, DiskCachedEmbedder(started.embedder))
    print(f"retrieval: {runtime.retrieval}")
    floors = [round(0.20 + 0.02 * i, 2) for i in range(15)]
    with throwaway_corpus(runtime, eval_set.corpus) as (dev_runtime, _):
        dev_sims = top_similarities(dev_runtime, [q["text"] for q in eval_set.queries])
        off_sims = top_similarities(dev_runtime, off_topic)
    print(f"stackfaq_dev corpus: {len(dev_sims)} dev queries, {len(off_sims)} off-topic questions")
    table(dev_sims, off_sims, floors, ("dev queries answered", "off-topic → needs_agent"))
    seed_corpus = [{"id": a["title"], "title": a["title"], "text": a["content"]} for a in load_seed_articles()]
    with throwaway_corpus(runtime, seed_corpus) as (seed_runtime, _):
        support_sims = top_similarities(seed_runtime, SUPPORT_QUESTIONS)
        off_seed_sims = top_similarities(seed_runtime, off_topic)
    print(f"\nfive seed articles: {len(support_sims)} support questions, {len(off_seed_sims)} off-topic questions")
    table(support_sims, off_seed_sims, floors, ("support answered", "off-topic → needs_agent"))


if __name__ == "__main__":
    main()
