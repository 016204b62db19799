"""Markdown files with a small front-matter block (``key: value`` lines between ``---``)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
