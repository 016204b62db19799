"""Draw search p50 latency against corpus size per strategy (naive, exact scan, exact walk) as an SVG, log-log.

Run by hand after bench/search.py runs of several sizes:
    python bench/plot_scale.py bench/results/search.jsonl docs/search_latency.svg [--topics 64]
Only runs of the cluster-bound walk count (they report ``walk_rows_p50``; earlier lines are the HNSW walk's);
the last run per size wins.
"""

from __future__ import annotations

import argparse
import json
import math
from html import escape
from pathlib import Path

STRATEGIES = (("naive_p50_ms", "naive ORDER BY", "#c0392b"), ("exact_p50_ms", "exact scan", "#e8892b"),
              ("index_p50_ms", "exact walk", "#2457c5"))
LEFT, TOP, WIDTH, HEIGHT = 70, 50, 460, 260


def _scale(value: float, low: float, high: float, length: float) -> float:
    return (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low)) * length


def line_chart(runs: list[dict], title: str) -> str:
    sizes = sorted({r["sections"] for r in runs})
    values = [r[key] for r in runs for key, _, _ in STRATEGIES if r.get(key)]
    x_low, x_high = min(sizes) / 1.5, max(sizes) * 1.5
    y_low, y_high = 10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values)))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 40}" height="{TOP + HEIGHT + 60}" '
             'font-family="sans-serif" font-size="12">',
             f'<text x="{LEFT}" y="18" font-weight="bold">{escape(title)}</text>',
             f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#999"/>']
    decade = y_low
    while decade <= y_high:
        y = TOP + HEIGHT - _scale(decade, y_low, y_high, HEIGHT)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{decade:g} ms</text>')
        decade *= 10
    for size in sizes:
        x = LEFT + _scale(size, x_low, x_high, WIDTH)
        parts.append(f'<text x="{x:.1f}" y="{TOP + HEIGHT + 16}" text-anchor="middle">{size:,}</text>')
    parts.append(f'<text x="{LEFT + WIDTH / 2}" y="{TOP + HEIGHT + 36}" text-anchor="middle">sections '
                 '(articles × 5; plus one vector per article)</text>')
    for i, (key, label, color) in enumerate(STRATEGIES):
        points = [(LEFT + _scale(r["sections"], x_low, x_high, WIDTH),
                   TOP + HEIGHT - _scale(r[key], y_low, y_high, HEIGHT)) for r in runs if r.get(key)]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in points)
        parts.append(f'<rect x="{LEFT + 10 + i * 130}" y="{TOP - 18}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{LEFT + 24 + i * 130}" y="{TOP - 9}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--topics", type=int, default=64)
    args = parser.parse_args()
    latest: dict[int, dict] = {}
    for line in args.source.read_text().splitlines():
        run = json.loads(line)
        if "walk_rows_p50" in run and run.get("topics") == args.topics:
            latest[run["sections"]] = run
    runs = [latest[size] for size in sorted(latest)]
    title = f"search p50 vs corpus size, {args.topics} topics, top-10, 2 cores"
    args.target.write_text(line_chart(runs, title) + "\n")
    print(f"wrote {args.target} ({len(runs)} sizes)")


if __name__ == "__main__":
    main()
