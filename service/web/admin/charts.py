"""Geometry for the dashboard's server-rendered SVG chart: stacked bars of outcomes per day. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

from service.tickets.deflection import Outcomes

WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 40, 10, 12, 34
# Bottom to top; each key names an Outcomes attribute or property. Together they add up to "asked".
SERIES = (("solved", "Solved by the answer"), ("open", "Answered, no reply yet"),
          ("escalated", "Escalated to an agent"), ("handed_off_waiting", "Handed off, no email yet"))


@dataclass(frozen=True)
class Bar:
    """One rectangle of a stack."""

    x: float
    y: float
    width: float
    height: float
    series: str
    label: str  # the tooltip: "2026-12-01 · 3 solved by the answer"


@dataclass(frozen=True)
class Tick:
    """An axis label at a position."""

    position: float
    text: str


@dataclass(frozen=True)
class Chart:
    """Everything the template draws."""

    width: int
    height: int
    plot_left: int
    plot_bottom: float
    plot_right: int
    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    series: tuple[tuple[str, str], ...] = SERIES


def nice_maximum(value: int) -> int:
    """The axis top: at least 1, rounded up to 1, 2 or 5 times a power of ten for values above 5."""
    if value <= 5:
        return max(value, 1)
    magnitude = 10 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 5, 10) if step * magnitude >= value)


def outcome_chart(by_day: list[tuple[date, Outcomes]]) -> Chart:
    """Stacked bars per day, a y axis with up to five ticks, and about seven date labels."""
    plot_width, plot_height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = nice_maximum(max((outcomes.asked for _, outcomes in by_day), default=0))
    slot = plot_width / max(len(by_day), 1)
    bars = []
    for index, (day, outcomes) in enumerate(by_day):
        base = float(TOP + plot_height)
        for key, name in SERIES:
            count = getattr(outcomes, key)
            if not count:
                continue
            height = plot_height * count / top
            base -= height
            bars.append(Bar(x=round(LEFT + index * slot + slot * 0.15, 2), y=round(base, 2),
                            width=round(slot * 0.7, 2), height=round(height, 2), series=key,
                            label=f"{day.isoformat()} · {count} {name.lower()}"))
    step = top // 5 if top > 5 else 1  # nice maxima above 5 (10, 20, 50…) divide by 5
    y_ticks = [Tick(round(TOP + plot_height - plot_height * value / top, 2), str(value))
               for value in range(0, top + 1, step)]
    every = max(1, math.ceil(len(by_day) / 7))
    x_ticks = [Tick(round(LEFT + index * slot + slot / 2, 2), day.strftime("%b %d"))
               for index, (day, _) in enumerate(by_day) if index % every == 0]
    return Chart(width=WIDTH, height=HEIGHT, plot_left=LEFT, plot_bottom=TOP + plot_height,
                 plot_right=WIDTH - RIGHT, bars=bars, y_ticks=y_ticks, x_ticks=x_ticks)
