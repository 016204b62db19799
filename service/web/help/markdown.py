"""Article markdown to safe HTML with heading anchors; anchors for section labels. Pure."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markupsafe import Markup

from service.retrieval.snippets import SECTION_SEPARATOR

# CommonMark with raw HTML off: whatever an article holds is escaped; markdown-it also refuses javascript: links.
_MARKDOWN = MarkdownIt("commonmark", {"html": False})
_NOT_SLUG = re.compile(r"[^\w\s-]")
_SEPARATORS = re.compile(r"[\s_-]+")


def slugify(text: str) -> str:
    """``"Didn't get the reset email?"`` → ``didnt-get-the-reset-email`` (ids for heading anchors)."""
    return _SEPARATORS.sub("-", _NOT_SLUG.sub("", text.lower())).strip("-") or "section"


def section_anchor(label: str | None) -> str | None:
    """The anchor of a section label "Title › Heading › Subheading": the slug of its last heading."""
    if not label or SECTION_SEPARATOR not in label:
        return None
    return slugify(label.rsplit(SECTION_SEPARATOR, 1)[1])


def render_article(content: str) -> Markup:
    """HTML for an article body; every heading gets an id from its text (repeats get -2, -3…)."""
    tokens = _MARKDOWN.parse(content)
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            slug = slugify(tokens[index + 1].content)
            seen[slug] = seen.get(slug, 0) + 1
            token.attrSet("id", slug if seen[slug] == 1 else f"{slug}-{seen[slug]}")
    return Markup(_MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {}))
