"""Who sent an e-mail, read strictly: exactly one well-formed mailbox in exactly one ``From:`` header.

``email.utils.getaddresses`` before Python 3.11.10 reads ``bob@example.com <mallory@evil.example>`` as two
addresses, the first of them Bob's, and recurses once per nested comment (600 ``(`` raise RecursionError). The
3.11.10+ ``strict=True`` semantics (an ambiguous header is no address at all) are implemented here in one linear
pass with no recursion, so they hold on 3.11.7 too. Internationalised (SMTPUTF8) local parts and domains are
addresses like any other.
"""

from __future__ import annotations

import re

_ATOM_CHARS = r"[^\s@<>()\[\],;:\\\".\x00-\x1f\x7f]+"
ADDR_SPEC = re.compile(rf"{_ATOM_CHARS}(?:\.{_ATOM_CHARS})*@{_ATOM_CHARS}(?:\.{_ATOM_CHARS})+")
_SPECIALS_IN_NAME = frozenset("@,;:<>[]\\")
_FOLDING = re.compile(r"\r?\n[ \t]")


def _without_comments_and_quotes(value: str) -> tuple[str, str] | None:
    """``value`` with comments removed, and a copy with quoted strings blanked too; None if unbalanced."""
    kept, unquoted, depth, quoted, escaped = [], [], 0, False, False
    for char in value:
        if escaped:
            escaped = False
            if depth == 0:
                kept.append(char)
                unquoted.append("_")
            continue
        if char == "\\" and (quoted or depth):
            escaped = True
            if depth == 0:
                kept.append(char)
                unquoted.append("_")
            continue
        if quoted:
            quoted = char != '"'
            kept.append(char)
            unquoted.append("_" if quoted else '"')
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return None
            depth -= 1
        elif depth == 0:
            quoted = char == '"'
            kept.append(char)
            unquoted.append(char)
    if depth or quoted or escaped:
        return None
    return "".join(kept), "".join(unquoted)


def strict_mailbox(values: list[str]) -> str | None:
    """The addr-spec of the one mailbox in ``values`` (the raw ``From:`` headers), or None when ambiguous.

    None for: no header or two; two addresses (a list, or a name that is itself an address); a group; an
    unbalanced comment or quote; a domain literal; anything not of the form ``addr-spec`` or
    ``[display name] <addr-spec>``.
    """
    if len(values) != 1 or len(values[0]) > 2000:
        return None
    stripped = _without_comments_and_quotes(_FOLDING.sub(" ", values[0]))
    if stripped is None:
        return None
    kept, unquoted = (part.strip() for part in stripped)
    if "<" not in unquoted:
        return kept if ADDR_SPEC.fullmatch(kept) else None
    opening = unquoted.find("<")
    if unquoted.count("<") != 1 or unquoted.count(">") != 1 or not unquoted.endswith(">"):
        return None
    if _SPECIALS_IN_NAME & set(unquoted[:opening]):
        return None
    address = kept[opening + 1:-1].strip()
    return address if ADDR_SPEC.fullmatch(address) else None
