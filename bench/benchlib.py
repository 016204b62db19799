"""What every benchmark does with its result: print one JSON line and append it to a results file.

A run changes no tracked file: lines go to ``artifacts/bench/`` (ignored by git). The figures the docs cite are
committed by copying the lines into ``bench/results/`` on purpose.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "bench"


def report(results_file: Path, result: dict[str, Any]) -> None:
    """Print ``result`` as one JSON line and append the same line to ``artifacts/bench/<results_file's name>``."""
    line = json.dumps(result)
    print(line)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / results_file.name).open("a") as out:
        out.write(line + "\n")


def machine_facts() -> dict[str, Any]:
    """The load average at the end of a run, the machine and the date: every result line carries them."""
    return {"load_average_end": [round(x, 2) for x in os.getloadavg()],
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "date": datetime.now(timezone.utc).isoformat(timespec="minutes")}
