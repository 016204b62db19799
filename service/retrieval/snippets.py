"""Text helpers for results: words, snippets and an article's sections. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.knowledge.markdown import scan_lines

SNIPPET_CHARS = 240
SECTION_SEPARATOR = " › "
_WORD = re.compile(r"[a-z0-9]+(?:['_-][a-z0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_STOP_WORDS = frozenset(
    "a an and are as at be but by can do does for from have how i if in is it my of on or so that the "
    "this to was what when where which who why will with you your me we our".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` minus common stop words."""
    return {word for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS}


def make_snippet(content: str, query: str, max_chars: int = SNIPPET_CHARS) -> str:
    """The sentence sharing most words with the query (plus what follows, up to ``max_chars``).

    Falls back to the start of the article when no sentence shares a word.
    """
    sentences = [s.strip(" #*-\t") for s in _SENTENCE_END.split(content) if s.strip(" #*-\t")]
    if not sentences:
        return ""
    wanted = content_words(query)
    overlaps = [len(wanted & content_words(sentence)) for sentence in sentences]
    best = max(range(len(sentences)), key=lambda i: (overlaps[i], -i)) if any(overlaps) else 0
    snippet = " ".join(sentences[best:])
    if len(snippet) <= max_chars:
        return snippet
    cut = snippet.rfind(" ", 0, max_chars - 1)
    return snippet[: cut if cut > 0 else max_chars - 1].rstrip(",;:") + "…"


@dataclass(frozen=True)
class Section:
    """A part of an article under one heading; ``path`` holds the headings above it."""

    path: tuple[str, ...]
    text: str

    def label(self, title: str) -> str:
        """"Title › Heading › Subheading" for citations."""
        return SECTION_SEPARATOR.join((title, *self.path))


def split_sections(content: str) -> list[Section]:
    """Split markdown at headings, keeping the heading path; text before the first heading has path ()."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text:
            sections.append(Section(tuple(h for _, h in path), text))
        lines.clear()

    for line, heading in scan_lines(content.splitlines()):
        if heading is None:
            lines.append(line)
            continue
        flush()
        path = [(lvl, h) for lvl, h in path if lvl < heading.level] + [(heading.level, heading.text)]
    flush()
    return sections


def best_section_by_words(sections: list[Section], query: str) -> Section:
    """The section (heading + text) sharing most words with the query; the first on ties."""
    wanted = content_words(query)
    return max(sections, key=lambda s: len(wanted & content_words(" ".join(s.path) + " " + s.text)))
