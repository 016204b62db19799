"""Choosing the confidence threshold for a target precision (issue 34 item 5): Clopper–Pearson lower bounds,
tested in a fixed sequence from the strictest threshold down, as in Learn then Test. Pure, no I/O."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from scipy.stats import beta

GRID = tuple(round(1.0 - i / 200, 3) for i in range(1, 200))  # 0.995 … 0.005, strictest first (fixed in advance)
MIN_ANSWERED = 10  # a threshold answering fewer labelled tickets is skipped, not tested (its bound is vacuous)


@dataclass(frozen=True)
class CurvePoint:
    """Answering every labelled ticket whose confidence reaches ``threshold``."""

    threshold: float
    answered: int
    right: int
    precision: float | None
    precision_lower_bound: float | None
    coverage: float

    def to_dict(self) -> dict:
        """JSON form (the curve of GET /api/gate)."""
        return asdict(self)


@dataclass(frozen=True)
class ThresholdChoice:
    """The chosen threshold and the point it gives. ``target_met`` False: no tested threshold reached the target,
    and the gate keeps to its most confident share instead (``confident_fallback``); None when no threshold answers
    enough labelled tickets to be tested."""

    threshold: float | None
    point: CurvePoint | None
    curve: list[CurvePoint]
    target_met: bool


def clopper_pearson_lower(right: int, answered: int, confidence: float) -> float:
    """One-sided lower bound on precision at ``confidence`` (exact binomial, Clopper–Pearson)."""
    if answered <= 0 or right <= 0:
        return 0.0
    return float(beta.ppf(1.0 - confidence, right, answered - right + 1))


def answered_to_test(target: float, confidence: float) -> int:
    """The fewest answered tickets whose lower bound can reach ``target`` even if every one is right: a threshold
    answering fewer cannot pass, so it is skipped rather than tested (at 0.9 and 90 %: 22)."""
    if target <= 0.0:
        return MIN_ANSWERED
    if target >= 1.0:
        return 2**31  # no count of answers can show a precision of 1: nothing is tested
    # all right, the bound is (1 − confidence)^(1/n); start just below the closed form and let the exact bound decide
    answered = max(MIN_ANSWERED, math.ceil(math.log(1.0 - confidence) / math.log(target)) - 1)
    while clopper_pearson_lower(answered, answered, confidence) < target:
        answered += 1
    return answered


def curve_point(confidences: Sequence[float], correct: Sequence[bool], threshold: float,
                confidence: float) -> CurvePoint:
    """Precision, its lower bound and coverage when answering at ``threshold``."""
    answered = [ok for c, ok in zip(confidences, correct) if c >= threshold]
    right = sum(answered)
    return CurvePoint(threshold, len(answered), right, right / len(answered) if answered else None,
                      clopper_pearson_lower(right, len(answered), confidence) if answered else None,
                      len(answered) / len(confidences) if confidences else 0.0)


def precision_curve(confidences: Sequence[float], correct: Sequence[bool], confidence: float,
                    grid: Sequence[float] = GRID) -> list[CurvePoint]:
    """One point per threshold of ``grid`` (strictest first): coverage never falls as the threshold falls."""
    return [curve_point(confidences, correct, t, confidence) for t in grid]


def choose_threshold(confidences: Sequence[float], correct: Sequence[bool], *, target: float,
                     confidence: float, grid: Sequence[float] = GRID) -> ThresholdChoice:
    """The lowest threshold reached before the first failure, testing from the strictest down, whose lower bound
    on precision reaches ``target`` (fixed-sequence testing keeps the error level at 1 − ``confidence``).
    Thresholds answering too few tickets to pass are skipped: which ones depends on the scores alone, never on the
    verdicts, so the sequence stays fixed given the scores (a certain failure would only end it early)."""
    curve = precision_curve(confidences, correct, confidence, grid)
    needed = answered_to_test(target, confidence)
    chosen: CurvePoint | None = None
    for point in curve:
        if point.answered < needed:
            continue
        if point.precision_lower_bound is None or point.precision_lower_bound < target:
            break
        chosen = point
    if chosen is not None:
        return ThresholdChoice(chosen.threshold, chosen, curve, True)
    fallback = confident_fallback(curve, needed)
    return ThresholdChoice(fallback.threshold if fallback else None, fallback, curve, False)


def confident_fallback(curve: Sequence[CurvePoint], needed: int) -> CurvePoint | None:
    """The fallback when the target cannot be shown: the gate keeps to its most confident share. Among the
    thresholds no looser than the first of the sequence (the strictest answering ``needed`` labelled tickets), the
    one with the highest lower bound (at least MIN_ANSWERED answered). The highest bound over *all* thresholds
    rewards answering more at a lower precision: on short FAQ questions it gave a mean precision of 0.85–0.93
    across held-back draws, this one 0.88–0.93 (docs/answer-gate.md)."""
    first = next((p for p in curve if p.answered >= needed), None)
    if first is None:
        return None
    stricter = [p for p in curve if p.threshold >= first.threshold and p.answered >= MIN_ANSWERED
                and p.precision_lower_bound is not None]
    return max(stricter, key=lambda p: (p.precision_lower_bound, -p.threshold))
