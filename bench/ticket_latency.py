"""Answer latency split (retrieval vs LLM) against the local OpenAI-compatible test server.

Run by hand:  python bench/ticket_latency.py [--tickets 40]
Starts tests/fake_openai.py's server on 127.0.0.1 (it answers instantly, so "llm" here is the SDK and HTTP
round trip, not a model's generation time), seeds a throwaway schema with the five default articles, and
answers tickets through service.tickets.workflow.answer_ticket with the LLM configured. Prints medians and p90s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.config import Settings  # noqa: E402
from service.knowledge.seeding import load_seed_articles  # noqa: E402
from service.providers.llm import OpenAIChatModel  # noqa: E402
from service.retrieval.evaluation import throwaway_corpus  # noqa: E402
from service.runtime import Runtime  # noqa: E402
from service.tickets.queries import get_ticket  # noqa: E402
from service.tickets.workflow import answer_ticket  # noqa: E402
from tests.fake_openai import FakeOpenAIServer  # noqa: E402

TICKETS = [("Password", "I forgot my password and cannot log in"), ("Refund", "How do I get my money back?"),
           ("Delivery", "Where is my package? It has not arrived."), ("Payment", "Do you take PayPal?"),
           ("Site down", "The website shows ERR_SSL_PROTOCOL_ERROR"), ("Checkout", "My card was declined")]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tickets", type=int, default=40)
    args = parser.parse_args()
    runtime = Runtime.start(Settings.from_env(), seed=False)
    corpus = [{"id": a["title"], "title": a["title"], "text": a["content"]} for a in load_seed_articles()]
    timings: dict[str, list[float]] = {"retrieval_ms": [], "llm_ms": [], "total_ms": []}
    with FakeOpenAIServer() as server, throwaway_corpus(runtime, corpus) as (seed_runtime, _):
        server.state.chat_reply = "Follow the steps in the article [1]."
        settings = replace(runtime.settings, llm_base_url=server.base_url, llm_api_key="bench")
        chat = OpenAIChatModel(settings)
        answer_ticket(seed_runtime, chat, {"subject": "warm-up", "body": TICKETS[0][1]})
        modes: dict[str, int] = {}
        for n in range(args.tickets):
            subject, body = TICKETS[n % len(TICKETS)]
            ticket_id = answer_ticket(seed_runtime, chat, {"subject": subject, "body": body})
            with seed_runtime.session() as session:
                ticket = get_ticket(session, ticket_id)
            modes[f"{ticket.status}/{ticket.mode}"] = modes.get(f"{ticket.status}/{ticket.mode}", 0) + 1
            if ticket.mode == "llm":
                for key in timings:
                    timings[key].append(ticket.timings[key])
    print(f"{args.tickets} tickets against a local OpenAI-compatible server on 127.0.0.1: {modes}")
    for key, values in timings.items():
        print(f"{key:>13}: median {statistics.median(values):7.1f}   p90 {percentile(values, 0.9):7.1f}")


if __name__ == "__main__":
    main()
