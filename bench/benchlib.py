"""What every benchmark does with its result: print one JSON line and append it to its results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def report(results_file: Path, result: dict[str, Any]) -> None:
    """Print ``result`` as one JSON line and append the same line to ``results_file``."""
    line = json.dumps(result)
    print(line)
    results_file.parent.mkdir(parents=True, exist_ok=True)
    with results_file.open("a") as out:
        out.write(line + "\n")
