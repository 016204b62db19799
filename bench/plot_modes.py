"""Draw nDCG@10 and success@3 per retrieval variant as an SVG bar chart (no plotting library needed).

Run by hand after bench/granularity_sweep.py (or bench/fusion_sweep.py):
    python bench/plot_modes.py bench/results/granularity_sweep.json docs/retrieval_modes.svg
A file of {set: {variant: metrics}} draws one row per set and variant.
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path

METRICS = (("ndcg@10", "#2457c5"), ("success@3", "#e8892b"))
ROW, BAR, LEFT, WIDTH, LOW = 34, 12, 260, 420, 0.0  # bars start at LOW


def bar_chart(scores: dict[str, dict[str, float]]) -> str:
    height = 60 + ROW * len(scores)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 90}" height="{height}" '
             'font-family="sans-serif" font-size="12">',
             f'<text x="{LEFT}" y="18" font-weight="bold">nDCG@10 and success@3 per retrieval variant '
             f'(axis from {LOW})</text>']
    for i, (name, color) in enumerate(METRICS):
        parts.append(f'<rect x="{LEFT + i * 110}" y="28" width="10" height="10" fill="{color}"/>'
                     f'<text x="{LEFT + 14 + i * 110}" y="37">{name}</text>')
    for row, (variant, metrics) in enumerate(scores.items()):
        y = 50 + row * ROW
        parts.append(f'<text x="{LEFT - 8}" y="{y + BAR + 2}" text-anchor="end">{escape(variant)}</text>')
        for i, (name, color) in enumerate(METRICS):
            value = metrics[name]
            length = max(0.0, (value - LOW) / (1 - LOW)) * WIDTH
            parts.append(f'<rect x="{LEFT}" y="{y + i * BAR}" width="{length:.1f}" height="{BAR - 1}" fill="{color}"/>'
                         f'<text x="{LEFT + length + 4:.1f}" y="{y + i * BAR + BAR - 2}">{value:.3f}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def flatten(scores: dict) -> dict[str, dict[str, float]]:
    """{set: {variant: metrics}} → {"set · variant": metrics}; a flat file is returned as it is."""
    if all("ndcg@10" in metrics for metrics in scores.values()):
        return scores
    return {f"{name} · {variant}": metrics for name, variants in scores.items() for variant, metrics in variants.items()}


def main() -> None:
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    target.write_text(bar_chart(flatten(json.loads(source.read_text()))))


if __name__ == "__main__":
    main()
