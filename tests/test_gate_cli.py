"""Issue 34: `supportrag gate status` and `supportrag gate calibrate --target`."""

from __future__ import annotations

import json

import sqlalchemy as sa
from click.testing import CliRunner

from service.cli.main import main
from service.gate.reviews import MIN_LABELS


def test_gate_status_on_a_new_database_is_the_shipped_default(cli_env):
    result = CliRunner().invoke(main, ["gate", "status", "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["source"] == "default" and status["labels"] == 0 and status["labels_needed"] == MIN_LABELS
    assert status["target_precision"] == 0.9 and status["curve"] == []


def test_gate_calibrate_with_no_reviews_keeps_the_default_and_audits_the_target(cli_env, db_engine):
    result = CliRunner().invoke(main, ["gate", "calibrate", "--target", "0.85"])
    assert result.exit_code == 0, result.output
    assert f"{MIN_LABELS} more needed" in result.output and "source default" in result.output
    with db_engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT actor, source, target_precision FROM gate_calibrations")).all()
    assert rows == [("cli", "default", 0.85)]


def test_gate_calibrate_refuses_a_target_outside_the_interval(cli_env):
    for target in ("0.5", "0.999", "1.2"):
        result = CliRunner().invoke(main, ["gate", "calibrate", "--target", target])
        assert result.exit_code == 2 and "--target" in result.output
