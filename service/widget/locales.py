"""The widget's strings, one JSON file per language in ``locales/`` (English is the fallback for any key)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

LOCALES_DIR = Path(__file__).parent / "locales"
DEFAULT_LOCALE = "en"


@cache
def all_locales() -> dict[str, dict[str, str]]:
    """Every shipped locale by code, each completed from English."""
    english = json.loads((LOCALES_DIR / f"{DEFAULT_LOCALE}.json").read_text(encoding="utf-8"))
    found = {}
    for path in sorted(LOCALES_DIR.glob("*.json")):
        found[path.stem] = english | json.loads(path.read_text(encoding="utf-8"))
    return found


def pick_locale(requested: str | None, accept_language: str | None = None) -> str:
    """``data-locale`` if shipped (``de-AT`` → ``de``), else the browser's first shipped language, else English."""
    candidates = [requested or ""]
    for part in (accept_language or "").split(","):
        candidates.append(part.split(";")[0].strip())
    for candidate in candidates:
        code = candidate.lower().split("-")[0].split("_")[0]
        if code in all_locales():
            return code
    return DEFAULT_LOCALE


def strings(locale: str) -> dict[str, str]:
    """The strings of a shipped locale (English for any other code)."""
    return all_locales().get(locale, all_locales()[DEFAULT_LOCALE])
