"""The calibrated answer gate: `gate status`, `gate calibrate --target`, `gate fit-default`, and the
answerability evaluation behind `eval --answerability`."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click
from tqdm import tqdm

from service.cli.context import connect
from service.gate.calibrator import DEFAULT_FILE, fit_calibrator, load_default_calibrator, load_default_threshold
from service.gate.evaluation import Attempt, answerability_report, ask_all
from service.gate.features import Features
from service.gate.reviews import calibrate, gate_status, review_matching
from service.gate.thresholds import choose_threshold
from service.retrieval.evaluation import EvalSet

DEFAULT_TARGET = 0.90
DEFAULT_CONFIDENCE = 0.90


def run_answerability(eval_set: EvalSet, fraction: float, seed: int, *, attempts_out: Path | None,
                      as_json: bool) -> None:
    """Ask every question with ``fraction`` of the articles held back; print the floor and gate figures."""
    if not 0.0 < fraction < 1.0:
        raise click.BadParameter("must be between 0 and 1 (exclusive)", param_hint="--answerability")
    runtime = connect(seed=False)
    with tqdm(total=len(eval_set.queries), desc="asking", disable=as_json, file=sys.stderr) as bar:
        attempts = ask_all(runtime, eval_set, fraction, seed, on_progress=bar.update)
    if attempts_out:
        attempts_out.write_text("\n".join(json.dumps(asdict(a)) for a in attempts) + "\n", encoding="utf-8")
    report = answerability_report(attempts, floor=runtime.settings.answer_min_similarity,
                                  default=load_default_calibrator(), default_threshold=load_default_threshold(),
                                  target=runtime.settings.answer_target_precision,
                                  confidence=runtime.settings.answer_confidence_level, seed=seed,
                                  match_similarity=runtime.settings.review_match_similarity)
    report = {"held_back_fraction": fraction, "seed": seed} | report
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(f"{report['questions']} questions, {report['answerable']} answerable, held back {fraction:.0%} "
               f"(seed {seed})")
    click.echo(f"{'gate':>24}  answered  precision  coverage  unanswerable answered")
    if report["team_150_then_200"]:
        report["team_150_then_200"]["answered"] = round(report["team_150_then_200"]["answered_share"] * 200)
    for name in ("fixed_floor", "default_calibrator", "calibrated_cross_fitted", "team_150_then_200"):
        row = report[name]
        if row is None:
            click.echo(f"{name:>24}  too few questions")
            continue
        click.echo(f"{name:>24}  {row['answered']:>8}  {_pct(row['precision']):>9}  "
                   f"{_pct(row['coverage_of_answerable']):>8}  {_pct(row['unanswerable_answered']):>22}")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def read_attempts(path: Path) -> list[Attempt]:
    """Attempts saved by `eval --answerability --attempts-out`."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Attempt(r["query_id"], r["answerable"], r["correct"],
                    Features.from_dict(r["features"]) if r["features"] else None, r.get("article"),
                    tuple(r["vector"]) if r.get("vector") else None) for r in rows]


@click.group()
def gate() -> None:
    """The calibrated answer gate: its status, calibration from the team's reviews, the shipped default."""


@gate.command("fit-default")
@click.argument("attempts", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--target", type=float, default=DEFAULT_TARGET, show_default=True)
@click.option("--confidence", type=float, default=DEFAULT_CONFIDENCE, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path(__file__).resolve().parent.parent / "gate" / DEFAULT_FILE, show_default=True)
def fit_default(attempts: tuple[Path, ...], target: float, confidence: float, out: Path) -> None:
    """Fit the shipped default calibrator on saved ATTEMPTS files (see docs/answer-gate.md)."""
    pooled = [a for path in attempts for a in read_attempts(path) if a.features is not None]
    calibrator = fit_calibrator([a.features for a in pooled], [a.correct for a in pooled], source="default")
    choice = choose_threshold([calibrator.confidence(a.features) for a in pooled], [a.correct for a in pooled],
                              target=target, confidence=confidence)
    threshold = choice.threshold if choice.threshold is not None else 1.0
    out.write_text(json.dumps({"fitted_on": [p.name for p in attempts], "target_precision": target,
                               "confidence_level": confidence, "threshold": threshold,
                               "calibrator": calibrator.to_dict()}, indent=2) + "\n", encoding="utf-8")
    click.echo(f"fitted on {len(pooled)} attempts; threshold {threshold} for target {target}; wrote {out}")


def _print_status(status: dict, as_json: bool) -> None:
    """The gate's status as JSON or a few lines."""
    if as_json:
        click.echo(json.dumps(status))
        return
    click.echo(f"source {status['source']}, threshold {status['threshold']:.3f}, target precision "
               f"{status['target_precision']:.3f} at {status['confidence_level']:.0%} confidence")
    click.echo(f"labels {status['labels']} (reviews; {status['labels_needed']} more needed for a team fit); "
               f"by source {status['label_sources']}")
    click.echo(f"on the reviews: precision {_pct(status['estimated_precision'])}, lower bound "
               f"{_pct(status['precision_lower_bound'])}, coverage {_pct(status['coverage'])}")
    if status.get("message"):
        click.echo(status["message"])


@gate.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print GET /api/gate's JSON.")
def status_command(as_json: bool) -> None:
    """The gate in force: source, threshold, target, labels and the estimate on the team's reviews."""
    runtime = connect()
    with runtime.session() as session:
        status = gate_status(session, default_target=runtime.settings.answer_target_precision,
                             default_confidence=runtime.settings.answer_confidence_level,
                             **review_matching(runtime))
    _print_status(status, as_json)


@gate.command("calibrate")
@click.option("--target", type=click.FloatRange(0.5, 0.999, min_open=True, max_open=True), required=True,
              help="Target precision among answered tickets.")
@click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=None,
              help="Confidence of the lower bound (default ANSWER_CONFIDENCE_LEVEL).")
@click.option("--json", "as_json", is_flag=True, help="Print GET /api/gate's JSON after calibrating.")
def calibrate_command(target: float, confidence: float | None, as_json: bool) -> None:
    """Refit the gate on the team's reviews and choose the threshold for TARGET (written to the audit log)."""
    runtime = connect()
    level = confidence if confidence is not None else runtime.settings.answer_confidence_level
    with runtime.session() as session:
        calibrate(session, target=target, confidence=level, actor="cli", **review_matching(runtime))
    with runtime.session() as session:
        status = gate_status(session, default_target=target, default_confidence=level, **review_matching(runtime))
    _print_status(status, as_json)
