"""The importance proposal rule. Pure: outcome counts in, a proposal (or why none) out; no I/O.

For an article over the window:
- good outcomes = answers citing it marked solved (help page, or helpful over the feedback API)
  + agent drafts citing it sent unchanged;
- bad outcomes = answers citing it escalated or rated not helpful + agent drafts citing it replaced;
- nothing is proposed below ``min_outcomes`` outcomes;
- smoothed solve rate = (good + PRIOR_OUTCOMES × mean) / (outcomes + PRIOR_OUTCOMES), where ``mean`` is the
  knowledge base's solve rate over the same window (a few outcomes pull little away from the mean);
- step = GAIN × (smoothed − mean), capped at ±``max_step``;
- proposed = current + step, kept within 0–2 and rounded to IMPORTANCE_DECIMALS;
- nothing is proposed when the proposed importance moves less than MIN_CHANGE.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from service.db.models import IMPORTANCE_MAX, IMPORTANCE_MIN

PRIOR_OUTCOMES = 5.0  # pseudo-outcomes at the mean added to every article
GAIN = 2.0  # importance per unit of solve rate above or below the mean
MIN_CHANGE = 0.05  # smaller moves are noise, not worth an admin's time
IMPORTANCE_DECIMALS = 2


@dataclass(frozen=True)
class OutcomeCounts:
    """What happened to the answers (and agent drafts) citing one article over the window."""

    solved: int = 0
    escalated: int = 0
    not_helpful: int = 0
    drafts_unchanged: int = 0
    drafts_replaced: int = 0

    @property
    def good(self) -> int:
        """Outcomes that speak for the article."""
        return self.solved + self.drafts_unchanged

    @property
    def bad(self) -> int:
        """Outcomes that speak against it."""
        return self.escalated + self.not_helpful + self.drafts_replaced

    @property
    def total(self) -> int:
        """Every counted outcome."""
        return self.good + self.bad


@dataclass(frozen=True)
class RuleSettings:
    """The rule's tunables (Settings: IMPORTANCE_MIN_OUTCOMES, IMPORTANCE_MAX_STEP)."""

    min_outcomes: int = 5
    max_step: float = 0.25


@dataclass(frozen=True)
class RuleDecision:
    """The rule's verdict with every number it used, so the page can show the evidence."""

    proposed_importance: float | None  # None: no proposal
    reason: str
    outcomes: int
    solve_rate: float | None
    smoothed_rate: float | None
    mean_rate: float
    step: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def mean_solve_rate(all_counts: list[OutcomeCounts]) -> float:
    """The knowledge base's solve rate: good outcomes over all outcomes (0.5 when there are none)."""
    total = sum(c.total for c in all_counts)
    return sum(c.good for c in all_counts) / total if total else 0.5


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def propose_importance(counts: OutcomeCounts, current: float, mean_rate: float,
                       rule: RuleSettings = RuleSettings()) -> RuleDecision:
    """Apply the rule (see the module docstring) to one article's counts."""
    n = counts.total
    if n < rule.min_outcomes:
        return RuleDecision(None, f"fewer than {rule.min_outcomes} outcomes", n, None, None, mean_rate, None)
    rate = counts.good / n
    smoothed = (counts.good + PRIOR_OUTCOMES * mean_rate) / (n + PRIOR_OUTCOMES)
    step = _clamp(GAIN * (smoothed - mean_rate), -rule.max_step, rule.max_step)
    proposed = round(_clamp(current + step, IMPORTANCE_MIN, IMPORTANCE_MAX), IMPORTANCE_DECIMALS)
    if abs(proposed - current) < MIN_CHANGE - 1e-9:
        return RuleDecision(None, "close to the knowledge base's mean", n, rate, smoothed, mean_rate, step)
    reason = "solved more often than the mean" if proposed > current else "solved less often than the mean"
    return RuleDecision(proposed, reason, n, rate, smoothed, mean_rate, step)
