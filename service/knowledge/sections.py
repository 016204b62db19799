"""An article's sections: the retrieval unit. Pure: splitting, windows, the texts that get embedded.

An embedding model reads a bounded window (MiniLM: 256 word pieces) and silently drops the rest, so an
article is embedded in parts: one part per markdown section, and a section longer than the window becomes
overlapping windows. Nothing is cut: every word of the article is inside some embedded part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from service.knowledge.markdown import scan_lines

PATH_SEPARATOR = " › "
MIN_SECTION_WORDS = 8  # a section shorter than this joins its neighbour (a heading over one line says little)
OVERLAP_FRACTION = 0.2  # of a window's budget, repeated at the start of the next window
HEADER_MARGIN_TOKENS = 4  # slack for tokens a join of words can add
_WORD = re.compile(r"\S+")

# Counts the model's tokens of each string (no special tokens).
TokenCounter = Callable[[Sequence[str]], list[int]]


@dataclass(frozen=True)
class SectionDraft:
    """A part of an article to embed: where it sits (heading path, character span) and its text.

    ``kind`` is "text" (a section or a window of one) or "heading" (the section's title and heading path
    alone, embedded on its own: a customer's question often reads like the heading that answers it).
    """

    ordinal: int
    heading_path: tuple[str, ...]
    text: str
    start: int  # character span of ``text`` in the article's content
    end: int
    kind: str = "text"

    def label(self, title: str) -> str | None:
        """"Title › Heading › Subheading" for citations; None for the lead (text before any heading)."""
        return PATH_SEPARATOR.join((title, *self.heading_path)) if self.heading_path else None


def section_embedding_text(title: str, heading_path: Sequence[str], text: str, kind: str = "text") -> str:
    """What is embedded for a section: the article title and heading path carry its context.

    A heading draft embeds "Title › Heading › Subheading" alone.
    """
    if kind == "heading":
        return PATH_SEPARATOR.join((title.strip(), *heading_path))
    header = title.strip() + ("\n" + PATH_SEPARATOR.join(heading_path) if heading_path else "")
    return f"{header}\n\n{text.strip()}"


def card_embedding_text(title: str, sections: Sequence[SectionDraft]) -> str:
    """The article's own vector (``knowledge_base.embedding``): title + lead, the first window before any heading.

    Identical to the first section's text when the article opens with a lead, so it is embedded once.
    """
    lead = sections[0] if sections and not sections[0].heading_path else None
    return section_embedding_text(title, (), lead.text) if lead else title.strip()


def _raw_sections(title: str, content: str) -> list[tuple[tuple[str, ...], int, int]]:
    """(heading path, start, end) of each heading's body; headings inside fenced code are text.

    A level-1 heading that repeats the title (markdown files often open with one) is not a section:
    what follows it is the lead.
    """
    found: list[tuple[tuple[str, ...], int, int]] = []
    path: list[tuple[int, str]] = []
    offset, body_start = 0, 0
    for line, heading in scan_lines(content.splitlines(keepends=True)):
        if heading is not None and heading.level == 1 and heading.text.casefold() == title.strip().casefold():
            heading = None
            if not content[body_start:offset].strip():
                body_start = offset + len(line)
        if heading is not None:
            found.append((tuple(text for _, text in path), body_start, offset))
            path = [(level, text) for level, text in path if level < heading.level] + [(heading.level, heading.text)]
            body_start = offset + len(line)
        offset += len(line)
    found.append((tuple(text for _, text in path), body_start, len(content)))
    return [(p, *_trim(content, s, e)) for p, s, e in found if content[s:e].strip()]


def _trim(content: str, start: int, end: int) -> tuple[int, int]:
    """Shrink a span to exclude surrounding whitespace."""
    text = content[start:end]
    return start + len(text) - len(text.lstrip()), end - (len(text) - len(text.rstrip()))


def _merge_tiny(raw: list[tuple[tuple[str, ...], int, int]], content: str) -> list[tuple[tuple[str, ...], int, int]]:
    """Join a section of fewer than MIN_SECTION_WORDS words to the next one (the last one to the previous)."""
    merged: list[tuple[tuple[str, ...], int, int]] = []
    carry: int | None = None  # start of a tiny section waiting for the next one
    for index, (path, start, end) in enumerate(raw):
        if carry is not None:
            start, carry = carry, None
        tiny = len(content[start:end].split()) < MIN_SECTION_WORDS
        if tiny and index < len(raw) - 1:
            carry = start
        elif tiny and merged:
            previous_path, previous_start, _ = merged.pop()
            merged.append((previous_path, previous_start, end))
        else:
            merged.append((path, start, end))
    return merged


def _windows(text: str, budget: int, count_tokens: TokenCounter) -> list[tuple[int, int]]:
    """Character spans of overlapping windows of at most ``budget`` tokens covering ``text`` (one if it fits)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    if not words:
        return []
    counts = count_tokens([text[s:e] for s, e in words])
    if sum(counts) <= budget:
        return [(words[0][0], words[-1][1])]
    overlap = max(1, int(budget * OVERLAP_FRACTION))
    spans, first = [], 0
    while first < len(words):
        last, used = first, 0
        while last < len(words) and (used + counts[last] <= budget or last == first):
            used += counts[last]
            last += 1
        spans.append((words[first][0], words[last - 1][1]))
        if last == len(words):
            break
        back, carried = last, 0  # step back over ~overlap tokens for the next window's start
        while back - 1 > first and carried + counts[back - 1] <= overlap:
            back -= 1
            carried += counts[back]
        first = back
    return spans


def split_sections(title: str, content: str, *, window_tokens: int,
                   count_tokens: TokenCounter) -> list[SectionDraft]:
    """The article's sections, in order: markdown headings first, then windows for long sections.

    ``window_tokens`` is the model's input window; each embedded text (title, heading path and the
    window) fits in it.
    """
    drafts: list[SectionDraft] = []
    for path, start, end in _merge_tiny(_raw_sections(title, content), content):
        header_tokens = sum(count_tokens(section_embedding_text(title, path, "").split()))
        budget = max(16, window_tokens - header_tokens - HEADER_MARGIN_TOKENS)
        windows = _windows(content[start:end], budget, count_tokens)
        for window_start, window_end in windows:
            span = (start + window_start, start + window_end)
            drafts.append(SectionDraft(len(drafts), path, content[span[0]:span[1]], *span))
        if path and windows:  # the heading alone, pointing at the section's first window
            first = drafts[-len(windows)]
            drafts.append(SectionDraft(len(drafts), path, first.text, first.start, first.end, kind="heading"))
    return drafts
