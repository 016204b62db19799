"""Text helpers for results: words and snippets. Pure."""

from __future__ import annotations

import re

SNIPPET_CHARS = 240
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
