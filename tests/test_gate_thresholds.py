"""Issue 34: the threshold choice's properties (Clopper–Pearson, fixed-sequence testing) and the calibrator."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from service.gate.calibrator import Calibrator, fit_calibrator, load_default_calibrator, load_default_threshold
from service.gate.features import ABSENT_RANK, FEATURE_NAMES, Features
from service.gate.thresholds import (MIN_ANSWERED, answered_to_test, choose_threshold, clopper_pearson_lower,
                                    precision_curve)
from service.tickets.workflow import CONTEXT_ARTICLES
from service.gate.evaluation import CONTEXT_ARTICLES as EVAL_CONTEXT_ARTICLES

labelled = st.lists(st.tuples(st.floats(0.0, 1.0), st.booleans()), min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(labelled, st.sampled_from([0.8, 0.9, 0.95]))
def test_the_curve_is_monotone_in_coverage(pairs, level):
    curve = precision_curve([c for c, _ in pairs], [ok for _, ok in pairs], level)
    coverages = [p.coverage for p in curve]  # strictest threshold first
    assert coverages == sorted(coverages)
    assert all(a.answered <= b.answered for a, b in zip(curve, curve[1:]))


@settings(max_examples=60, deadline=None)
@given(labelled, st.sampled_from([0.8, 0.9, 0.95]))
def test_the_lower_bound_never_exceeds_the_empirical_precision(pairs, level):
    for point in precision_curve([c for c, _ in pairs], [ok for _, ok in pairs], level):
        if point.answered:
            assert point.precision_lower_bound <= point.precision + 1e-12


@pytest.mark.parametrize("right, answered", [(9, 10), (45, 50), (1, 1), (30, 40), (0, 5)])
@pytest.mark.parametrize("level", [0.8, 0.9, 0.99])
def test_more_labels_give_a_tighter_bound(right, answered, level):
    bounds = [clopper_pearson_lower(right * k, answered * k, level) for k in (1, 2, 4, 8)]
    if right == 0:
        assert bounds == [0.0] * 4
    else:
        assert bounds == sorted(bounds) and bounds[0] < bounds[-1] <= right / answered


@settings(max_examples=80, deadline=None)
@given(labelled, st.sampled_from([0.7, 0.8, 0.9]), st.sampled_from([0.8, 0.9]))
def test_the_chosen_threshold_meets_the_target_on_its_labels(pairs, target, level):
    scores, correct = [c for c, _ in pairs], [ok for _, ok in pairs]
    choice = choose_threshold(scores, correct, target=target, confidence=level)
    if choice.target_met:
        answered = [ok for c, ok in zip(scores, correct) if c >= choice.threshold]
        assert len(answered) >= answered_to_test(target, level) >= MIN_ANSWERED
        assert clopper_pearson_lower(sum(answered), len(answered), level) >= target
        # fixed sequence: every stricter tested threshold passed too
        for point in choice.curve:
            if point.threshold > choice.threshold and point.answered >= answered_to_test(target, level):
                assert point.precision_lower_bound >= target


def test_clearly_separated_labels_get_a_threshold_between_the_classes():
    scores = [0.95] * 60 + [0.2] * 60
    correct = [True] * 60 + [False] * 60
    choice = choose_threshold(scores, correct, target=0.9, confidence=0.9)
    assert choice.target_met and 0.2 < choice.threshold <= 0.95 and choice.point.precision == 1.0


@pytest.mark.parametrize("target, level", [(0.6, 0.5), (0.8, 0.9), (0.9, 0.9), (0.9, 0.95), (0.95, 0.8), (0.999, 0.99)])
def test_too_few_answered_to_pass_is_the_fewest_that_could(target, level):
    needed = answered_to_test(target, level)
    assert clopper_pearson_lower(needed, needed, level) >= target
    assert needed == MIN_ANSWERED or clopper_pearson_lower(needed - 1, needed - 1, level) < target


def test_a_strict_threshold_answering_too_few_to_pass_does_not_end_the_sequence():
    # 15 answered at the strictest thresholds, all right: a bound of at most 0.86, which cannot reach 0.9 whatever
    # the verdicts; testing it would end the sequence before the 80 well-supported answers below it
    scores = [0.99] * 15 + [0.7] * 80 + [0.1] * 40
    correct = [True] * 15 + [True] * 78 + [False] * 2 + [False] * 40
    choice = choose_threshold(scores, correct, target=0.9, confidence=0.9)
    assert choice.target_met and choice.point.answered == 95 and choice.threshold <= 0.7


def test_an_unreachable_target_falls_back_to_the_strictest_tested_threshold_and_says_so():
    scores = [i / 100 for i in range(100)]
    correct = [i % 3 != 0 for i in range(100)]  # two thirds right everywhere: 0.9 can never be shown
    choice = choose_threshold(scores, correct, target=0.9, confidence=0.9)
    needed = answered_to_test(0.9, 0.9)
    first = next(p for p in choice.curve if p.answered >= needed)
    assert not choice.target_met and choice.threshold >= first.threshold
    # the best bound among the thresholds no looser than the first tested one
    eligible = [p for p in choice.curve if p.threshold >= first.threshold and p.answered >= MIN_ANSWERED]
    assert choice.point.precision_lower_bound == max(p.precision_lower_bound for p in eligible)


def test_the_fallback_answers_the_confident_few_rather_than_the_best_bound_on_many():
    # 25 most confident: 21 right (0.84), then 200 more at 0.93: the bound is highest answering all 225 (about
    # 0.89), yet the target (0.90) is shown nowhere, so the gate keeps to the confident few instead of answering all
    scores = [0.9] * 25 + [0.5] * 200
    correct = [True] * 21 + [False] * 4 + [True] * 186 + [False] * 14
    choice = choose_threshold(scores, correct, target=0.9, confidence=0.9)
    best = max(choice.curve, key=lambda p: p.precision_lower_bound or 0.0)
    assert best.answered == 225 and best.precision_lower_bound < 0.9
    assert not choice.target_met and choice.point.answered == 25 and choice.threshold > 0.5


def test_the_fallback_prefers_a_precise_few_within_the_confident_share():
    # 12 most confident all right, then 13 at 0.6 precision: below the first tested threshold (25 answered) the
    # 12 have the better bound, so the gate answers those
    scores = [0.95] * 12 + [0.8] * 13 + [0.3] * 100
    correct = [True] * 12 + [True] * 8 + [False] * 5 + [True] * 60 + [False] * 40
    choice = choose_threshold(scores, correct, target=0.9, confidence=0.9)
    assert not choice.target_met and choice.point.answered == 12 and choice.threshold > 0.8


def _features(similarity: float, agree: bool) -> Features:
    return Features(top_similarity=similarity, section_similarity=similarity, margin=similarity / 3,
                    bm25_score=10 * similarity, bm25_rank=1 if agree else ABSENT_RANK, legs_agree=agree,
                    word_overlap=similarity, question_words=6, above_floor=2, heading_similarity=similarity)


def test_the_calibrator_learns_that_stronger_evidence_is_more_often_right_and_survives_json():
    features = [_features(0.3 + i / 100, i % 2 == 0) for i in range(60)]
    correct = [i >= 25 for i in range(60)]
    calibrator = fit_calibrator(features, correct, source="team")
    again = Calibrator.from_dict(json.loads(json.dumps(calibrator.to_dict())))
    assert again.confidence(_features(0.85, True)) > 0.8 > 0.2 > again.confidence(_features(0.3, False))
    assert again.confidence(features[7]) == pytest.approx(calibrator.confidence(features[7]))


def test_fitting_needs_both_outcomes():
    with pytest.raises(ValueError, match="both right and wrong"):
        fit_calibrator([_features(0.5, True)] * 20, [True] * 20, source="team")


def test_the_shipped_default_calibrator_loads_over_todays_features():
    default = load_default_calibrator()
    assert default.features == FEATURE_NAMES and default.labels > 500 and default.source == "default"
    assert 0.0 < load_default_threshold() < 1.0
    assert default.confidence(_features(0.8, True)) > default.confidence(_features(0.35, False))


def test_the_evaluation_retrieves_as_many_articles_as_a_ticket():
    assert EVAL_CONTEXT_ARTICLES == CONTEXT_ARTICLES
