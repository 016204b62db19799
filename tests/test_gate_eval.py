"""Issue 34 item 9: `supportrag eval --answerability FRACTION --seed N` on a small set of its own."""

from __future__ import annotations

import json

from click.testing import CliRunner

from service.cli.main import main
from service.gate.evaluation import hold_back

TOPICS = {
    "refund": ("Refunds", "Request a refund from Orders within 30 days; the money returns to your card in 5 days."),
    "password": ("Reset your password", "Click Forgot password on the login page and follow the e-mailed link."),
    "shipping": ("Shipping times", "Standard shipping takes 3 to 5 business days; express arrives next day."),
    "invoice": ("Download an invoice", "Invoices are under Account, Billing; each order has a PDF invoice."),
    "delete": ("Delete your account", "Write to support from your account's address; deletion takes 7 days."),
    "gift": ("Gift cards", "Gift cards never expire and can be used for any product in the store."),
}
QUESTIONS = {
    "refund": ["How do I get my money back?", "Can I return an order for a refund?", "refund policy"],
    "password": ["I forgot my password", "How can I reset my login password?", "password reset link"],
    "shipping": ["How long does delivery take?", "When will my parcel arrive?", "shipping time"],
    "invoice": ["Where is my invoice?", "I need a PDF invoice for my order", "download invoice"],
    "delete": ["Close my account please", "How do I delete my account?", "remove my data"],
    "gift": ["Do gift cards expire?", "Can I use a gift card on anything?", "gift card validity"],
}


def _write_set(folder) -> list[str]:
    corpus = [{"id": key, "title": title, "text": text} for key, (title, text) in TOPICS.items()]
    queries = [{"id": f"{key}-{i}", "text": q} for key, qs in QUESTIONS.items() for i, q in enumerate(qs)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (folder / "qrels.tsv").write_text("query_id\tdoc_id\trelevance\n" + "".join(
        f"{q['id']}\t{q['id'].split('-')[0]}\t1\n" for q in queries))
    return [str(folder / name) for name in ("corpus.jsonl", "queries.jsonl", "qrels.tsv")]


def test_the_hold_back_is_seeded_and_takes_the_fraction():
    corpus = [{"id": str(i)} for i in range(30)]
    kept, held = hold_back(corpus, 1 / 3, seed=4)
    assert len(held) == 10 and len(kept) == 20 and hold_back(corpus, 1 / 3, seed=4)[1] == held
    assert hold_back(corpus, 1 / 3, seed=5)[1] != held


def test_eval_answerability_reports_the_floor_and_the_calibrated_gate(cli_env, tmp_path):
    paths = _write_set(tmp_path)
    result = CliRunner().invoke(main, ["eval", *paths, "--answerability", "0.34", "--seed", "1", "--json",
                                       "--attempts-out", str(tmp_path / "attempts.jsonl")])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    held = hold_back([{"id": key} for key in TOPICS], 0.34, 1)[1]
    assert report["questions"] == 18 and report["answerable"] == 18 - 3 * len(held)
    floor = report["fixed_floor"]
    assert set(report["calibrated_cross_fitted"]) >= {"precision", "coverage_of_answerable",
                                                     "unanswerable_answered", "thresholds"}
    assert report["team_150_then_200"] is None and report["curve"]
    saved = [json.loads(line) for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert sum(not a["answerable"] for a in saved) == 3 * len(held)
    assert all(not a["correct"] for a in saved if not a["answerable"])
    answered = [a for a in saved if a["features"] and a["features"]["top_similarity"] >= 0.30]
    unanswerable = [a for a in saved if not a["answerable"]]
    assert floor["answered"] == len(answered)
    assert floor["precision"] == sum(a["correct"] for a in answered) / len(answered)
    assert floor["unanswerable_answered"] == sum(a in answered for a in unanswerable) / len(unanswerable)


def test_eval_answerability_refuses_a_fraction_outside_zero_to_one(cli_env, tmp_path):
    result = CliRunner().invoke(main, ["eval", *_write_set(tmp_path), "--answerability", "1.5"])
    assert result.exit_code == 2 and "--answerability" in result.output
