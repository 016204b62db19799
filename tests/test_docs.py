"""The README stays true: its commands are the ones CI runs, and it documents every setting."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# The README is moving into a MkDocs site (docs/): a setting may be documented in either.
DOCS = README + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def test_ci_runs_exactly_the_readme_test_command():
    test_command = next(line for line in README.splitlines() if "pytest" in line and line.startswith("python3"))
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_readme_documents_every_environment_variable_the_service_reads():
    sources = "\n".join(p.read_text() for p in (ROOT / "service").rglob("*.py"))
    read = set(re.findall(r'env(?:\.get)?\(\s*"([A-Z_]+)"', sources))
    read |= set(re.findall(r'env\["([A-Z_]+)"\]', sources))
    read |= set(re.findall(r'_(?:int|float)\(env, "([A-Z_]+)"', sources))
    read |= set(re.findall(r'envvar="([A-Z_]+)"', sources))
    assert read, "found no settings at all: the pattern is out of date"
    missing = sorted(name for name in read if f"`{name}`" not in DOCS)
    assert missing == []
