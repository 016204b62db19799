"""Cutting the quoted history off a reply, in time linear in the body's length.

mail-parser-reply (used before) finds "On … wrote:" with ``^On\\s(?:.+?\\s?.+?)\\s?wrote:$``: two lazy ``.+?``
around an optional ``\\s?`` try every split of a line that never ends in "wrote:", so one line of
``"On " + "a " * N`` costs O(N²) (7.2 s at N = 8,000; a 1 MiB body would take hours). Bounding its input could
not help: many short such lines cost the same in total. So the header lines are recognised here with plain string
tests (a prefix, a word, a suffix) on each line, and the text is cut before the first one: every line is looked
at a bounded number of times, whatever it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HeaderRule:
    """A reply header line: it starts with ``prefix``, contains ``word`` and ends with ``suffix`` (lower case)."""

    prefix: str
    word: str
    suffix: str

    def matches(self, line: str) -> bool:
        """Whether the (lower-cased, unquoted) line is such a header."""
        return line.startswith(self.prefix) and line.endswith(self.suffix) and self.word in line[len(self.prefix):]


# "On <date>, <name> wrote:" in the languages mail-parser-reply was configured with (en, de, fr, es, it, nl).
WROTE_HEADERS = (
    HeaderRule("on ", "", "wrote:"),
    HeaderRule("am ", " schrieb", ":"),
    HeaderRule("le ", "", "a écrit:"),
    HeaderRule("el ", "", "escribió:"),
    HeaderRule("il ", "", "ha scritto:"),
    HeaderRule("op ", " schreef", ":"),
)
# Outlook's block: a From: line followed by Sent:/Date:/To:/Subject: (each alternation is a fixed word: linear).
_FROM_LINE = re.compile(r"\*?(?:from|von|de|da|van)\s?\*?:", re.IGNORECASE)
_BLOCK_LINE = re.compile(r"\*?(?:sent|date|to|subject|cc|gesendet|datum|an|betreff|envoyé|date|à|objet|enviado|"
                         r"fecha|para|asunto|inviato|data|a|oggetto|verzonden|datum|aan|onderwerp)\s?\*?:",
                         re.IGNORECASE)
_SEPARATOR = re.compile(r"-{3,}\s?(?:original message|ursprüngliche nachricht|message d'origine|mensaje original|"
                        r"messaggio originale|oorspronkelijk bericht)\s?-{3,}", re.IGNORECASE)
_QUOTE_MARKS = re.compile(r"(?:> ?)+")
_RULE = re.compile(r"[_-]{20,}")  # Outlook draws a line above its block
OUTLOOK_BLOCK_LOOKAHEAD = 3  # lines after a From: line that may hold the rest of the block


def _normalise(line: str) -> str:
    """Lower case, unquoted, one kind of space, and no space before a final colon ("a écrit :")."""
    line = _QUOTE_MARKS.sub("", line.strip(), count=1) if line.lstrip().startswith(">") else line.strip()
    line = line.replace("\xa0", " ").lower()
    return line[:-2].rstrip() + ":" if line.endswith(" :") else line


def _is_wrote_header(line: str) -> bool:
    return any(rule.matches(line) for rule in WROTE_HEADERS)


def _starts_outlook_block(lines: list[str], index: int) -> bool:
    if not _FROM_LINE.match(lines[index]):
        return False
    following = [line for line in lines[index + 1:index + 1 + OUTLOOK_BLOCK_LOOKAHEAD] if line]
    return bool(following) and _BLOCK_LINE.match(following[0]) is not None


def quote_start(lines: list[str]) -> int | None:
    """The index of the first line of quoted history (a reply header), or None."""
    normalised = [_normalise(line) for line in lines]
    for index, line in enumerate(normalised):
        if not line:
            continue
        if _is_wrote_header(line) or _SEPARATOR.fullmatch(line) or _starts_outlook_block(normalised, index):
            return index
        following = normalised[index + 1] if index + 1 < len(normalised) else ""
        if following and _is_wrote_header(f"{line} {following}"):  # a header wrapped over two lines
            return index
    return None


def strip_quoted(text: str) -> str:
    """The new text of a reply: quoted history and the "On … wrote:" line removed (all of it if nothing is left)."""
    lines = text.replace("\r\n", "\n").split("\n")
    start = quote_start(lines)
    if start is None:
        return text.strip()
    while start > 0 and (not lines[start - 1].strip() or _RULE.fullmatch(lines[start - 1].strip())):
        start -= 1
    cut = "\n".join(lines[:start]).strip()
    return cut or text.strip()
