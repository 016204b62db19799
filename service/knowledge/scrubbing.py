"""Turning an agent's public reply into a candidate article. Pure: PII scrubbing, the template, the dedup verdict.

``scrub_personal_data``: e-mail addresses, phone numbers, runs of 6+ digits (order and card numbers, spaces or
dashes allowed between the digits) and the ticket's reference (``T-<id>``). ``scrub_reply`` adds what needs to
know the ticket: names, greetings and sign-offs, card fragments, order and account numbers, postal addresses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from service.knowledge.scrubbing_rules import (
    introduced_names,
    name_parts,
    remove_greetings_and_sign_offs,
    remove_identifiers,
    remove_names,
)

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# 6+ digits, possibly grouped by single spaces or dashes: 4111 1111 1111 1111, 1234-5678, 20240117.
DIGIT_RUN = re.compile(r"(?<![\w-])[A-Za-z]{0,3}\d(?:[ -]?\d){5,}(?!\w)")
# A phone number: an optional +country code, then groups of digits with spaces, dots, dashes or brackets,
# 7 to 15 digits in all.
PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}(?![\w])")
TICKET_REFERENCE = re.compile(r"\bT-\d+\b", re.IGNORECASE)
TITLE_CHARS = 120


def _digits(text: str) -> int:
    return sum(ch.isdigit() for ch in text)


def scrub_personal_data(text: str, *, ticket_id: int | None = None) -> str:
    """``text`` with e-mail addresses, phone numbers, long digit runs and ticket references replaced."""
    text = EMAIL.sub("[email]", text)
    text = TICKET_REFERENCE.sub("[ticket]", text)
    if ticket_id is not None:
        text = re.sub(rf"(?:ticket|#)\s*#?{ticket_id}\b", "[ticket]", text, flags=re.IGNORECASE)
    text = PHONE.sub(lambda m: "[phone]" if 7 <= _digits(m.group()) <= 15 and not _is_plain_number(m.group())
                     else m.group(), text)
    return DIGIT_RUN.sub("[number]", text)


def _is_plain_number(match: str) -> bool:
    """A run of digits alone (an order number) is a number, not a phone: the digit-run rule takes it."""
    return match.isdigit()


def candidate_title(question: str) -> str:
    """The customer's question, first line, cut at a word near 120 characters."""
    first = next((line.strip() for line in question.splitlines() if line.strip()), "Untitled question")
    if len(first) > TITLE_CHARS:
        cut = first.rfind(" ", 0, TITLE_CHARS)
        first = first[: cut if cut > 0 else TITLE_CHARS].rstrip(",;:") + "…"
    return first[0].upper() + first[1:]


def template_body(replies: list[str]) -> str:
    """The plain article without a language model: the agent's replies as paragraphs, greetings and all."""
    return "\n\n".join(reply.strip() for reply in replies if reply.strip())


@dataclass(frozen=True)
class DedupDecision:
    """``new`` article, or ``add_to`` the nearest section when it is at least as similar as the threshold."""

    action: str
    similarity: float | None


def decide_dedup(nearest_similarity: float | None, threshold: float) -> DedupDecision:
    """The deduplication verdict for a candidate whose nearest existing section has ``nearest_similarity``."""
    if nearest_similarity is not None and nearest_similarity >= threshold:
        return DedupDecision("add_to", nearest_similarity)
    return DedupDecision("new", nearest_similarity)


def names_in(texts: Sequence[str]) -> list[str]:
    """The names a set of texts introduce (a question's "Maria here" scrubs the reply's "Maria" too)."""
    return [name for text in texts for name in introduced_names(text)]


def scrub_reply(text: str, *, names: Sequence[str] = ()) -> str:
    """``text`` (a reply, or a customer's question) safe to show other people and to publish: without ``names``
    (the customer's and the agents'), names the text itself introduces, greeting and sign-off lines, card
    fragments, order and account numbers, postal addresses, e-mails and phones."""
    found = [*names, *introduced_names(text)]
    text = remove_greetings_and_sign_offs(text)
    text = remove_identifiers(scrub_personal_data(text))
    text = remove_names(text, name_parts(found))
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
