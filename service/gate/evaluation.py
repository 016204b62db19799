"""`supportrag eval --answerability` (issue 34 item 9): hold back a seeded fraction of the articles, ask every
question, and measure the fixed floor and the calibrated gate (cross-fitted on halves of the questions)."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

from service.gate.calibrator import Calibrator, fit_calibrator
from service.gate.evidence import gather_features
from service.gate.features import Features
from service.gate.memory import OFF, ReviewedQuestion, effective_score, leave_one_out_verdicts, nearest_verdict
from service.gate.thresholds import choose_threshold, precision_curve
from service.retrieval.evaluation import EvalSet, _QueryVectors, throwaway_corpus
from service.retrieval.search import run_search
from service.runtime import Runtime

CONTEXT_ARTICLES = 3  # what a ticket retrieves (service.tickets.workflow.CONTEXT_ARTICLES; a test ties them)


@dataclass(frozen=True)
class Attempt:
    """One question asked of the reduced knowledge base."""

    query_id: str
    answerable: bool  # a relevant article is still in the knowledge base
    correct: bool  # the rank-1 article is relevant (what the extractive answer quotes)
    features: Features | None
    article: str | None = None  # the rank-1 document's id
    vector: tuple[float, ...] | None = None  # the question's unit vector (for the reviewed-neighbour rule)

    def reviewed(self) -> ReviewedQuestion:
        """This attempt as a reviewed question (its label is ``correct``)."""
        vector = np.array(self.vector, dtype=np.float32) if self.vector is not None else None
        return ReviewedQuestion(0, vector, self.article, self.correct)


@dataclass(frozen=True)
class GateFigures:
    """How a gate did on a set of attempts."""

    questions: int
    answered: int
    precision: float | None
    coverage_of_answerable: float | None
    unanswerable_answered: float | None

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


def hold_back(corpus: list[dict], fraction: float, seed: int) -> tuple[list[dict], set[str]]:
    """The kept documents and the ids of the held-back ones (a seeded shuffle)."""
    ids = sorted(doc["id"] for doc in corpus)
    random.Random(seed).shuffle(ids)
    held = set(ids[:round(len(ids) * fraction)])
    return [doc for doc in corpus if doc["id"] not in held], held


def ask_all(runtime: Runtime, eval_set: EvalSet, fraction: float, seed: int,
            on_progress: Callable[[int], None] | None = None) -> list[Attempt]:
    """Every judged question against the knowledge base without the held-back articles."""
    kept, held = hold_back(eval_set.corpus, fraction, seed)
    queries = [q for q in eval_set.queries if eval_set.qrels.get(q["id"])]
    attempts: list[Attempt] = []
    floor = runtime.settings.answer_min_similarity
    with throwaway_corpus(runtime, kept) as (eval_runtime, doc_of):
        embedder = _QueryVectors(eval_runtime.embedder, [q["text"].strip() for q in queries])
        with eval_runtime.session() as session:
            for query in queries:
                relevant = {doc for doc, gain in eval_set.qrels[query["id"]].items() if gain > 0}
                outcome = run_search(session, embedder, query["text"], limit=CONTEXT_ARTICLES,
                                     weights=runtime.weights, retrieval=runtime.retrieval)
                features = gather_features(session, embedder, query["text"].strip(), outcome, floor=floor,
                                           weights=runtime.weights, retrieval=runtime.retrieval)
                top = doc_of[outcome.results[0].id] if outcome.results else None
                vector = embedder.embed([query["text"].strip()])[0]
                vector = tuple(round(float(x), 6) for x in vector / np.linalg.norm(vector))
                attempts.append(Attempt(query["id"], bool(relevant - held), top in relevant, features, top, vector))
                if on_progress:
                    on_progress(1)
    return attempts


def measure(attempts: Sequence[Attempt], answered: Sequence[bool]) -> GateFigures:
    """Precision of the answered, coverage of the answerable, share of the unanswerable answered."""
    given = [a for a, yes in zip(attempts, answered) if yes]
    answerable = [yes for a, yes in zip(attempts, answered) if a.answerable]
    unanswerable = [yes for a, yes in zip(attempts, answered) if not a.answerable]
    return GateFigures(len(attempts), len(given), sum(a.correct for a in given) / len(given) if given else None,
                       sum(answerable) / len(answerable) if answerable else None,
                       sum(unanswerable) / len(unanswerable) if unanswerable else None)


def floor_answers(attempts: Sequence[Attempt], floor: float) -> list[bool]:
    """The fixed floor: answer when the best cosine reaches it."""
    return [a.features is not None and a.features.top_similarity >= floor for a in attempts]


def calibrated_answers(attempts: Sequence[Attempt], calibrator: Calibrator | None, threshold: float | None,
                       floor: float, reviewed: Sequence[Attempt] = (), match_similarity: float = OFF) -> list[bool]:
    """The calibrated gate: confidence reaches the threshold (and the cosine the floor); a question near a
    ``reviewed`` one answered from the same article takes its verdict instead (service.gate.memory)."""
    if calibrator is None or threshold is None:
        return [False] * len(attempts)
    known = [r.reviewed() for r in reviewed if r.features is not None]
    answers = []
    for a in attempts:
        if a.features is None or a.features.top_similarity < floor:
            answers.append(False)
            continue
        verdict = nearest_verdict(known, a.reviewed().vector, a.article, match_similarity)
        answers.append(effective_score(calibrator.confidence(a.features), verdict) >= threshold)
    return answers


def calibrate_on(attempts: Sequence[Attempt], *, target: float, confidence: float,
                 match_similarity: float = OFF) -> tuple[Calibrator | None, float | None]:
    """A team calibrator and threshold from labelled attempts (what POST /api/gate/calibrate does, the
    reviewed-neighbour rule judged leave one out); (None, None) when the labels hold only one outcome (nothing to
    fit: the gate answers nothing)."""
    usable = [a for a in attempts if a.features is not None]
    if len({a.correct for a in usable}) < 2:
        return None, None
    calibrator = fit_calibrator([a.features for a in usable], [a.correct for a in usable], source="team")
    verdicts = leave_one_out_verdicts([a.reviewed() for a in usable], match_similarity)
    scores = [effective_score(calibrator.confidence(a.features), v) for a, v in zip(usable, verdicts)]
    return calibrator, choose_threshold(scores, [a.correct for a in usable], target=target,
                                        confidence=confidence).threshold


def cross_fit(attempts: Sequence[Attempt], *, target: float, confidence: float, floor: float,
              seed: int, match_similarity: float = OFF) -> tuple[GateFigures, list[float | None]]:
    """Calibrate on one half of the questions, measure on the other, both ways; pooled figures and thresholds."""
    order = list(range(len(attempts)))
    random.Random(seed).shuffle(order)
    halves = [[attempts[i] for i in order[::2]], [attempts[i] for i in order[1::2]]]
    measured: list[Attempt] = []
    answered: list[bool] = []
    thresholds: list[float | None] = []
    for fit_half, test_half in (halves, halves[::-1]):
        calibrator, threshold = calibrate_on(fit_half, target=target, confidence=confidence,
                                             match_similarity=match_similarity)
        thresholds.append(threshold)
        measured += test_half
        answered += calibrated_answers(test_half, calibrator, threshold, floor, fit_half, match_similarity)
    return measure(measured, answered), thresholds


def team_protocol(attempts: Sequence[Attempt], *, target: float, confidence: float, floor: float, seed: int,
                  labelled: int = 150, asked: int = 200, repeats: int = 10,
                  match_similarity: float = OFF) -> dict | None:
    """The issue's held-out check on a dev set: review ``labelled`` questions, calibrate, ask ``asked`` others;
    repeated over seeded draws, the mean figures and the worst precision (None: the set is too small)."""
    if len(attempts) < labelled + asked:
        return None
    runs: list[GateFigures] = []
    for repeat in range(repeats):
        order = list(attempts)
        random.Random(seed * 1000 + repeat).shuffle(order)
        reviewed, later = order[:labelled], order[labelled:labelled + asked]
        calibrator, threshold = calibrate_on(reviewed, target=target, confidence=confidence,
                                             match_similarity=match_similarity)
        runs.append(measure(later, calibrated_answers(later, calibrator, threshold, floor, reviewed,
                                                      match_similarity)))

    def mean(name: str) -> float:
        return sum(getattr(r, name) or 0.0 for r in runs) / len(runs)

    return {"labelled": labelled, "asked": asked, "repeats": repeats, "precision": mean("precision"),
            "worst_precision": min(r.precision or 0.0 for r in runs), "answered_share": mean("answered") / asked,
            "coverage_of_answerable": mean("coverage_of_answerable"),
            "unanswerable_answered": mean("unanswerable_answered")}


def answerability_report(attempts: Sequence[Attempt], *, floor: float, default: Calibrator,
                         default_threshold: float, target: float, confidence: float, seed: int,
                         match_similarity: float = OFF) -> dict:
    """The figures `supportrag eval --answerability` prints (the calibrated rows with the reviewed-neighbour rule
    at ``match_similarity``; ``OFF``, without it)."""
    crossed, thresholds = cross_fit(attempts, target=target, confidence=confidence, floor=floor, seed=seed,
                                    match_similarity=match_similarity)
    usable = [a for a in attempts if a.features is not None]
    curve = precision_curve([default.confidence(a.features) for a in usable], [a.correct for a in usable],
                            confidence)
    return {
        "questions": len(attempts), "answerable": sum(a.answerable for a in attempts),
        "rank1_right": sum(a.correct for a in attempts),
        "fixed_floor": {"floor": floor} | measure(attempts, floor_answers(attempts, floor)).to_dict(),
        "default_calibrator": {"threshold": default_threshold} | measure(
            attempts, calibrated_answers(attempts, default, default_threshold, floor)).to_dict(),
        "calibrated_cross_fitted": {"target_precision": target, "thresholds": thresholds} | crossed.to_dict(),
        "review_match_similarity": match_similarity,
        "team_150_then_200": team_protocol(attempts, target=target, confidence=confidence, floor=floor, seed=seed,
                                           match_similarity=match_similarity),
        "curve": [p.to_dict() for p in curve[::10]],
    }
