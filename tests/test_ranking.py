"""The ranking formula as pure functions, table-driven."""

from datetime import datetime, timedelta, timezone

import pytest

from service.retrieval.ranking import (
    RankingWeights,
    age_in_days,
    final_score,
    recency,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("age_days, window, expected", [
    (0, 365, 1.0),
    (182.5, 365, 0.5),
    (365, 365, 0.0),
    (400, 365, 0.0),          # never negative
    (-3, 365, 1.0),           # clock skew: capped at 1
    (15, 30, 0.5),            # the window is a setting
])
def test_recency_is_linear_decay_over_the_window_clamped_to_0_1(age_days, window, expected):
    assert recency(age_days, window) == pytest.approx(expected)


@pytest.mark.parametrize("created, expected_days", [
    (NOW, 0.0),
    (NOW - timedelta(days=10), 10.0),
    (NOW - timedelta(hours=36), 1.5),
])
def test_age_in_days_is_fractional(created, expected_days):
    assert age_in_days(created, NOW) == pytest.approx(expected_days)


@pytest.mark.parametrize("similarity, rec, importance, expected", [
    (1.0, 1.0, 1.0, 1.0),
    (0.5, 1.0, 1.0, 0.6),
    (0.5, 0.0, 2.0, 0.4),       # old: importance no longer helps
    (0.5, 1.0, 0.0, 0.4),       # importance 0 switches recency off
    (0.5, 1.0, 2.0, 0.8),
    (0.9, 0.5, 1.5, 0.87),
])
def test_final_score_matches_the_product_formula(similarity, rec, importance, expected):
    assert final_score(similarity, rec, importance) == pytest.approx(expected)


def test_weights_are_settings():
    weights = RankingWeights(similarity_weight=0.5, recency_weight=0.5)
    assert final_score(0.6, 1.0, 1.0, weights) == pytest.approx(0.8)

