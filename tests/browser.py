"""Finding a Chromium for the browser tests, and where their screenshots go. Never downloads a browser."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Set by .ci/run: a missing browser fails the run instead of skipping the browser tests.
REQUIRE_BROWSER_VARIABLE = "SUPPORTRAG_REQUIRE_BROWSER"
# Where screenshots go; `SUPPORTRAG_SCREENSHOTS_DIR=docs/screenshots` refreshes the README's copies.
SCREENSHOTS_VARIABLE = "SUPPORTRAG_SCREENSHOTS_DIR"
INSTALL_HINT = ("no Chromium found (CHROMIUM_PATH, then chromium, chromium-browser, google-chrome on PATH); "
                "install one with 'apt-get install -y chromium' or set CHROMIUM_PATH to run the browser tests")


def find_chromium(environ: dict[str, str] | os._Environ = os.environ) -> Path | None:
    """CHROMIUM_PATH if it names an executable, else the first of the usual names on PATH."""
    explicit = environ.get("CHROMIUM_PATH")
    if explicit:
        return Path(explicit) if os.access(explicit, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name, path=environ.get("PATH"))
        if found:
            return Path(found)
    return None


def browser_required(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether a missing browser must fail the run (CI) rather than skip the browser tests."""
    return environ.get(REQUIRE_BROWSER_VARIABLE, "") not in ("", "0")


def screenshots_dir(repo_root: Path, environ: dict[str, str] | os._Environ = os.environ) -> Path:
    """An ignored folder by default (a test run never changes tracked files)."""
    chosen = Path(environ.get(SCREENSHOTS_VARIABLE) or repo_root / "artifacts" / "screenshots")
    path = chosen if chosen.is_absolute() else repo_root / chosen
    path.mkdir(parents=True, exist_ok=True)
    return path
