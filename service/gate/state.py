"""The gate in force: the newest calibration row, else the shipped default."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import GateCalibration
from service.gate.calibrator import Calibrator, load_default_calibrator, load_default_threshold
from service.gate.features import Features


@dataclass(frozen=True)
class ActiveGate:
    """The calibrator and threshold answering now."""

    calibrator: Calibrator
    threshold: float
    source: str  # "default" | "team"
    calibration: GateCalibration | None


def active_gate(session: Session) -> ActiveGate:
    """The newest calibration, or the shipped default when the team has none."""
    row = session.scalars(sa.select(GateCalibration).order_by(GateCalibration.id.desc()).limit(1)).first()
    if row is None:
        return ActiveGate(load_default_calibrator(), load_default_threshold(), "default", None)
    return ActiveGate(Calibrator.from_dict(row.calibrator), row.threshold, row.source, row)


def confidence_of(features: Features | None, gate: ActiveGate) -> float | None:
    """P(answer right) under the gate in force (None without features: nothing to answer from)."""
    return None if features is None else round(gate.calibrator.confidence(features), 6)
