"""The visible text of an HTML e-mail body, in time linear in its length.

Neither a regular expression over tags (``<[^>]*>`` is O(n²) on ``<`` with no ``>``) nor ``html.parser`` will do:
on Python 3.11.7, the interpreter this service runs on, ``HTMLParser`` rescans the rest of the input for every
unclosed ``<a`` or ``<!--`` (CVE-2025-6069): 64 KiB of ``<a`` takes 2.2 s, 1 MiB would take minutes. So the tags
are skipped here by ``str.find`` calls that each either move past what they found or end the scan: every
character is looked at a bounded number of times, whatever the input.
"""

from __future__ import annotations

import html
import re

_BREAKS = frozenset({"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "hr",
                     "table", "ul", "ol", "pre"})
_HIDDEN = frozenset({"script", "style", "head", "title"})
_CLOSERS = {name: re.compile(rf"</{name}\b", re.IGNORECASE) for name in _HIDDEN}  # a literal prefix: linear
_NAME_END = re.compile(r"[\s/>]")


def _tag_name(tag: str) -> str:
    """``div`` of ``div class="x"`` or ``/div``; lower case, without the slash."""
    tag = tag.lstrip("/")
    end = _NAME_END.search(tag)
    return (tag[:end.start()] if end else tag).lower()


def html_to_text(content: str) -> str:
    """Visible text of an HTML body (tags, comments, scripts and styles dropped, entities decoded, breaks kept).

    A ``<`` that does not open a tag (``a < b``, or one with no ``>`` after it) is text, as a browser shows it.
    """
    out: list[str] = []
    pos, length = 0, len(content)
    while pos < length:
        start = content.find("<", pos)
        if start < 0:
            out.append(content[pos:])
            break
        out.append(content[pos:start])
        following = content[start + 1:start + 2]
        if content.startswith("<!--", start):
            end = content.find("-->", start + 4)
            pos = length if end < 0 else end + 3  # an unclosed comment hides the rest, as in a browser
            continue
        if not (following.isalpha() or following in ("/", "!", "?")):
            out.append("<")
            pos = start + 1
            continue
        end = content.find(">", start + 1)
        if end < 0:  # no ">" anywhere after: the rest is text, and the scan is over
            out.append(content[start:])
            break
        name = _tag_name(content[start + 1:end])
        pos = end + 1
        out.append("\n" if name in _BREAKS else " ")
        if name in _HIDDEN and not content[start + 1:end].startswith("/"):
            closer = _CLOSERS[name].search(content, pos)
            pos = length if closer is None else closer.start()
    return html.unescape("".join(out))
