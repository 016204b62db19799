"""Cutting the quoted history off a reply, in time linear in the body's length.

mail-parser-reply (used before) finds "On … wrote:" with ``^On\\s(?:.+?\\s?.+?)\\s?wrote:$``: two lazy ``.+?``
around an optional ``\\s?`` try every split of a line that never ends in "wrote:", so one line of
``"On " + "a " * N`` costs O(N²) (7.2 s at N = 8,000; a 1 MiB body would take hours), and its signature regex
(``\\s*^…``) is quadratic in a run of blank lines. Bounding its input could not help: many short such lines cost
the same in total. So the reply headers are found here by one regular expression written so that it cannot
backtrack more than once over a line: each alternative holds at most one unbounded ``[^\\n]*`` followed by a
fixed suffix; "contains a word" and "ends with a colon" are lookaheads (atomic in Python); the quote marks and
a wrapped header's first line are possessive (``*+``, Python 3.11). The whole search then runs in C, a bounded
number of passes over each line.
"""

from __future__ import annotations

import re

# Reply headers in the languages mail-parser-reply was configured with (en, de, fr, es, it, nl): "On <date>,
# <name> wrote:" (also wrapped over two lines), Outlook's "From:" block, and "--- Original Message ---".
_WROTE = r"(?:wrote|a[ \t\xa0]écrit|escribió|ha[ \t]scritto)[ \t\xa0]?:[ \t]*$"
_QUOTE = r"[ \t]*+(?:>[ \t]?)*+"  # possessive: never backtracked into
_HEADER = re.compile(rf"""
    ^{_QUOTE}
    (?=on|le|el|il|am|op|\*|from|von|de|da|van|---)  # one cheap look: most lines go no further
    (?:
        (?:on|le|el|il)[ \t](?:[^\n]*{_WROTE}|[^\n]*+\n{_QUOTE}[^\n]*{_WROTE})
      | (?:am[ \t](?=[^\n]*?[ \t]schrieb)|op[ \t](?=[^\n]*?[ \t]schreef))
        (?:(?=[^\n]*:[ \t]*$)|[^\n]*+\n{_QUOTE}(?=[^\n]*:[ \t]*$))
      | \*?(?:from|von|de|da|van)[ \t]?\*?:[^\n]*+\n(?:[ \t]*\n){{0,2}}[ \t]*
        \*?(?:sent|date|to|subject|cc|gesendet|datum|an|betreff|envoyé|à|objet|enviado|fecha|para|asunto|inviato|
            data|a|oggetto|verzonden|aan|onderwerp)[ \t]?\*?:
      | -{{3,}}+[ \t]?(?:original[ \t]message|ursprüngliche[ \t]nachricht|message[ \t]d'origine|mensaje[ \t]original|
                    messaggio[ \t]originale|oorspronkelijk[ \t]bericht)[ \t]?-{{3,}}[ \t]*$
    )""", re.IGNORECASE | re.MULTILINE | re.VERBOSE)
_RULE = re.compile(r"[_-]{20,}")  # Outlook draws a line above its block


def quote_start(text: str) -> int | None:
    """The offset where quoted history starts (its reply header's line), or None."""
    match = _HEADER.search(text)
    return match.start() if match else None


def _without_trailing_rules(text: str) -> str:
    """``text`` without the blank lines and horizontal rules that introduced the history below it."""
    text = text.rstrip()
    while True:
        head, _, last = text.rpartition("\n")
        if not _RULE.fullmatch(last.strip()):
            return text
        text = head.rstrip()


def split_quoted(text: str) -> tuple[str, str]:
    """(the new text of a reply, the quoted history cut from it); the history is "" when nothing was cut."""
    text = text.replace("\r\n", "\n")
    start = quote_start(text)
    cut = _without_trailing_rules(text[:start]).strip() if start is not None else ""
    return (cut, text[start:].strip()) if cut else (text.strip(), "")


def strip_quoted(text: str) -> str:
    """The new text of a reply: quoted history and the "On … wrote:" line removed (all of it if nothing is left)."""
    return split_quoted(text)[0]
