"""How the browser tests find a Chromium, and when a missing one fails the run instead of skipping."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .browser import browser_required, find_chromium, screenshots_dir


def executable(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_chromium_path_wins_over_path(tmp_path):
    chosen = executable(tmp_path, "my-chrome")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir, "chromium")
    assert find_chromium({"CHROMIUM_PATH": str(chosen), "PATH": str(bin_dir)}) == chosen


def test_a_chromium_path_that_is_not_executable_finds_nothing(tmp_path):
    assert find_chromium({"CHROMIUM_PATH": str(tmp_path / "missing"), "PATH": ""}) is None


@pytest.mark.parametrize("name", ["chromium", "chromium-browser", "google-chrome"])
def test_the_usual_names_are_found_on_path(tmp_path, name):
    found = executable(tmp_path, name)
    assert find_chromium({"PATH": str(tmp_path)}) == found


def test_nothing_on_path_finds_nothing(tmp_path):
    assert find_chromium({"PATH": str(tmp_path)}) is None


@pytest.mark.parametrize(("value", "required"), [(None, False), ("", False), ("0", False), ("1", True)])
def test_only_ci_turns_a_missing_browser_into_a_failure(value, required):
    environ = {} if value is None else {"SUPPORTRAG_REQUIRE_BROWSER": value}
    assert browser_required(environ) is required


def test_screenshots_go_to_an_ignored_folder_unless_told_otherwise(tmp_path):
    assert screenshots_dir(tmp_path, {}) == tmp_path / "artifacts" / "screenshots"
    assert screenshots_dir(tmp_path, {"SUPPORTRAG_SCREENSHOTS_DIR": "docs/screenshots"}) == tmp_path / "docs/screenshots"
    assert "artifacts/" in (Path(__file__).resolve().parent.parent / ".gitignore").read_text().split()


def test_ci_requires_the_browser():
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "export SUPPORTRAG_REQUIRE_BROWSER=1" in ci
    assert os.access(Path(__file__).resolve().parent.parent / ".ci" / "run", os.R_OK)
