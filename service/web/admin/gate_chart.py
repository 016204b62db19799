"""Geometry of the AI answers page's precision/coverage chart (inline SVG, no script). Pure."""

from __future__ import annotations

from dataclasses import dataclass

WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 48, 14, 12, 40


@dataclass(frozen=True)
class CurveChart:
    """Everything the template draws: two polylines, the operating point, the axes' ticks."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    precision: str  # "x,y x,y …"
    lower_bound: str
    point: tuple[float, float] | None  # the gate's (coverage, precision), when it answers a reviewed ticket
    marker_x: float | None  # the gate's coverage: where the operating point lies on the x axis
    target_y: float | None
    ticks: list[tuple[float, float, str]]  # (x, y, label) of 0, 0.25 … 1 on each axis


def _x(coverage: float) -> float:
    return round(LEFT + (WIDTH - LEFT - RIGHT) * coverage, 1)


def _y(precision: float) -> float:
    return round(HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * precision, 1)


def curve_chart(curve: list[dict], *, coverage: float | None, precision: float | None,
                target: float | None) -> CurveChart:
    """Precision (and its lower bound) against coverage; the gate's operating point and the target line."""
    drawn = [p for p in curve if p["precision"] is not None]
    line = " ".join(f"{_x(p['coverage'])},{_y(p['precision'])}" for p in drawn)
    bound = " ".join(f"{_x(p['coverage'])},{_y(p['precision_lower_bound'])}" for p in drawn)
    point = (_x(coverage), _y(precision)) if coverage is not None and precision is not None else None
    ticks = [(_x(v), _y(v), f"{v:.2f}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return CurveChart(WIDTH, HEIGHT, LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM, line, bound, point,
                      _x(coverage) if coverage is not None else None, _y(target) if target is not None else None, ticks)
