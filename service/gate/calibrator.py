"""The calibrator (issue 34 item 2): logistic regression over the evidence features, fitted by scikit-learn and
stored as plain JSON (no pickles), so a confidence is a dot product at answer time."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from service.gate.features import FEATURE_NAMES, Features

DEFAULT_FILE = "default_calibrator.json"
REGULARISATION = 1.0  # scikit-learn's C: a mild prior, as a team's 150 labels would overfit an unpenalised fit


@dataclass(frozen=True)
class Calibrator:
    """P(answer right | features) = sigmoid(intercept + Σ coef·(x − mean)/scale)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    labels: int  # how many labelled outcomes it was fitted on
    source: str  # "default" | "team"

    def confidence(self, features: Features) -> float:
        """The probability that answering with these features is right."""
        z = self.intercept + sum(c * (x - m) / s for c, x, m, s in
                                 zip(self.coef, features.vector(), self.mean, self.scale))
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def to_dict(self) -> dict:
        """JSON form (the shipped file and the calibration row)."""
        return asdict(self) | {"features": list(self.features), "mean": list(self.mean),
                               "scale": list(self.scale), "coef": list(self.coef)}

    @classmethod
    def from_dict(cls, data: dict) -> "Calibrator":
        """Back from JSON; refuses a calibrator over other features."""
        if tuple(data["features"]) != FEATURE_NAMES:
            raise ValueError(f"calibrator features {data['features']} differ from {list(FEATURE_NAMES)}")
        return cls(tuple(data["features"]), tuple(data["mean"]), tuple(data["scale"]), tuple(data["coef"]),
                   float(data["intercept"]), int(data["labels"]), str(data["source"]))


def fit_calibrator(features: Sequence[Features], correct: Sequence[bool], *, source: str) -> Calibrator:
    """Fit on labelled outcomes; both outcomes must occur."""
    if len(set(correct)) < 2:
        raise ValueError("fitting needs both right and wrong answers among the labels")
    x = np.array([f.vector() for f in features], dtype=float)
    scaler = StandardScaler().fit(x)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    model = LogisticRegression(C=REGULARISATION, max_iter=1000).fit((x - scaler.mean_) / scale,
                                                                     np.array(correct, dtype=int))
    return Calibrator(FEATURE_NAMES, tuple(map(float, scaler.mean_)), tuple(map(float, scale)),
                      tuple(map(float, model.coef_[0])), float(model.intercept_[0]), len(correct), source)


def load_default_calibrator() -> Calibrator:
    """The calibrator shipped in the package (fitted on the dev sets, see docs/answer-gate.md)."""
    text = resources.files("service.gate").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
    return Calibrator.from_dict(json.loads(text)["calibrator"])


def load_default_threshold() -> float:
    """The confidence threshold shipped with the default calibrator (its target on the dev sets)."""
    text = resources.files("service.gate").joinpath(DEFAULT_FILE).read_text(encoding="utf-8")
    return float(json.loads(text)["threshold"])
