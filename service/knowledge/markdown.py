"""Markdown: front matter (``key: value`` lines between ``---``) and ATX headings outside fenced code. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

# CommonMark ATX headings: up to 3 spaces, 1-6 '#', a space or tab, optional closing '#'s.
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Heading:
    """An ATX heading: its level (1-6) and text."""

    level: int
    text: str


def scan_lines(lines: Iterable[str]) -> Iterator[tuple[str, Heading | None]]:
    """Each line with its heading, or None; lines inside fenced code are never headings."""
    fence: str | None = None
    for line in lines:
        if (opening := _FENCE.match(line)) is not None:
            marker = opening.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            yield line, None
            continue
        match = None if fence is not None else _HEADING.match(line)
        yield line, Heading(len(match.group(1)), match.group(2).strip()) if match else None


@dataclass(frozen=True)
class MarkdownDocument:
    """Front-matter keys (lower-cased) and the body that follows them."""

    meta: dict[str, str] = field(default_factory=dict)
    body: str = ""


def parse_front_matter(text: str) -> MarkdownDocument:
    """Split ``---``-delimited ``key: value`` lines from the body; no front matter → all body."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return MarkdownDocument(body=text.strip())
    meta: dict[str, str] = {}
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return MarkdownDocument(meta=meta, body="\n".join(lines[index + 1:]).strip())
        key, sep, value = line.partition(":")
        if sep and key.strip():
            meta[key.strip().lower()] = value.strip().strip("\"'")
    # An opening --- that is never closed is not front matter.
    return MarkdownDocument(body=text.strip())
