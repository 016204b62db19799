"""Article markdown to safe HTML with heading anchors; anchors for section labels. Pure."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup, escape

from service.knowledge.sections import PATH_SEPARATOR as SECTION_SEPARATOR

# CommonMark with raw HTML off: whatever an article holds is escaped; markdown-it also refuses javascript: links.
# Tables (the GFM pipe-table extension) are on: pricing and limits pages are made of them; their cells are inline
# markdown like any paragraph, so the same escaping and the answer's link filter apply inside them.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")
_NOT_SLUG = re.compile(r"[^\w\s-]")
_SEPARATORS = re.compile(r"[\s_-]+")
_CITATION = re.compile(r"(\[\d{1,2}\])")
# A "•" line (how extractive answers quote a list as plain text) is a list item, not a soft break in a paragraph.
_BULLET_LINE = re.compile(r"^([ \t]*)• ", re.MULTILINE)


def slugify(text: str) -> str:
    """``"Didn't get the reset email?"`` → ``didnt-get-the-reset-email`` (ids for heading anchors)."""
    return _SEPARATORS.sub("-", _NOT_SLUG.sub("", text.lower())).strip("-") or "section"


def section_anchor(label: str | None) -> str | None:
    """The anchor of a section label "Title › Heading › Subheading": the slug of its last heading."""
    if not label or SECTION_SEPARATOR not in label:
        return None
    return slugify(label.rsplit(SECTION_SEPARATOR, 1)[1])


def _aligned_by_class(tokens: list[Token]) -> list[Token]:
    """A table column's alignment as a class (``align-right``): the pages' CSP refuses inline style attributes."""
    for token in tokens:
        if token.type in ("th_open", "td_open") and (style := str(token.attrGet("style") or "")):
            token.attrs.pop("style", None)
            token.attrSet("class", "align-" + style.removeprefix("text-align:"))
    return tokens


def render_article(content: str) -> Markup:
    """HTML for an article body; every heading gets an id from its text (repeats get -2, -3…)."""
    tokens = _aligned_by_class(_MARKDOWN.parse(content))
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            slug = slugify(tokens[index + 1].content)
            seen[slug] = seen.get(slug, 0) + 1
            token.attrSet("id", slug if seen[slug] == 1 else f"{slug}-{seen[slug]}")
    return Markup(_MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {}))


def _linked_citations(text: str, links: dict[int, str]) -> list[Token]:
    """Text tokens with each known ``[n]`` made a link (the only HTML here is ours, its URL escaped)."""
    tokens = []
    for part in _CITATION.split(text):
        number = int(part[1:-1]) if _CITATION.fullmatch(part) else None
        if number in links:
            tokens.append(Token("html_inline", "", 0, content=f'<a href="{escape(links[number])}">{part}</a>'))
        elif part:
            tokens.append(Token("text", "", 0, content=part))
    return tokens


def _local_links_only(children: list[Token]) -> list[Token]:
    """Drop links that leave the site and images (their text stays): a model's answer may not send customers away."""
    kept: list[Token] = []
    open_links: list[bool] = []
    for child in children:
        if child.type == "link_open":
            href = str(child.attrGet("href") or "")
            open_links.append(href.startswith("/") and not href.startswith("//"))
            if not open_links[-1]:
                continue
        elif child.type == "link_close" and open_links and not open_links.pop():
            continue
        elif child.type == "image":
            child = Token("text", "", 0, content=child.content)
        kept.append(child)
    return kept


def render_answer(answer: str, links: dict[int, str]) -> Markup:
    """HTML for an answer (markdown, raw HTML escaped, only on-site links), ``[n]`` linked to ``links[n]``."""
    tokens = _aligned_by_class(_MARKDOWN.parse(_BULLET_LINE.sub(r"\1- ", answer)))
    for token in tokens:
        if token.type == "inline" and token.children:
            token.children = [piece for child in _local_links_only(token.children)
                              for piece in (_linked_citations(child.content, links) if child.type == "text"
                                            else [child])]
    return Markup(_MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {}))
