"""The patterns ``scrub_reply`` removes: names (known, and those a text introduces), greeting and sign-off lines,
card fragments, order and account numbers, postal addresses. Pure."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

# A name-like word: capitalised, letters with an inner apostrophe or hyphen (O'Neil, Anne-Marie, José).
NAME_WORD = r"[A-ZÀ-Ý][a-zà-ÿ]+(?:['’-][A-Za-zÀ-ÿ]+)?"
FULL_NAME = rf"{NAME_WORD}(?:\s+{NAME_WORD}){{0,2}}"
GREETING_WORDS = (r"(?i:hi|hello|hey|hiya|dear|greetings|good\s+(?:morning|afternoon|evening|day)|howdy|yo|"
                  r"hallo|bonjour|hola|ciao)")
SIGN_OFF_WORDS = (r"(?i:best(?:\s+(?:regards|wishes))?|kind\s+regards|warm(?:est)?\s+regards|regards|many\s+thanks|"
                  r"thanks(?:\s+(?:again|so\s+much|a\s+lot))?|thank\s+you(?:\s+(?:again|so\s+much))?|cheers|"
                  r"sincerely|yours(?:\s+(?:sincerely|truly))?|all\s+the\s+best|take\s+care|talk\s+soon|"
                  r"with\s+thanks|speak\s+soon|respectfully|thx|ta|viele\s+grüße|mit\s+freundlichen\s+grüßen|"
                  r"liebe\s+grüße|merci|cordialement|bien\s+à\s+vous|saludos|un\s+saludo|grazie|cordiali\s+saluti)")
# A whole line that only greets: "Hi Maria,", "Hello!", "Dear Mr. Lopez,", "Good morning Maria".
GREETING_LINE = re.compile(rf"^\s*{GREETING_WORDS}\b(?:[\s,]+[\w.'’-]+){{0,4}}\s*[,.!:]?[ \t]*$\n?", re.MULTILINE)
# A greeting that opens a longer line: "Hi, Maria here. I was…" loses "Hi, " (the name goes with its own rule).
GREETING_PREFIX = re.compile(rf"\A\s*{GREETING_WORDS}\b(?:\s+{FULL_NAME})?\s*[,!:.-]\s*")
# A sign-off line ("Best,", "Best, Agnes", "Thanks again! — Agnes"): it and the signature block after it go.
SIGN_OFF_LINE = re.compile(rf"^\s*[-–—]*\s*{SIGN_OFF_WORDS}\b[^\n]{{0,40}}$")
SIGN_OFF_LINES = 6  # a sign-off is looked for among the last non-empty lines only (a signature block's length)
SIGNATURE_DELIMITER = re.compile(r"^-- ?$(?:\n.*)*\Z", re.MULTILINE)
# Names a text introduces about its author or its reader.
INTRODUCED = (
    re.compile(rf"\b(?i:my\s+name\s+is|this\s+is|i\s+am|i'm|name:)\s+({FULL_NAME})"),
    re.compile(rf"(?:^|[.!?,]\s+)({FULL_NAME})\s+here\b", re.MULTILINE),
    re.compile(rf"^\s*{GREETING_WORDS}\b[\s,]+(?:(?:Mr|Mrs|Ms|Miss|Dr|Mx)\.?\s+)?({FULL_NAME})\s*[,.!:\n]",
               re.MULTILINE),
    re.compile(rf"^\s*[-–—]*\s*{SIGN_OFF_WORDS}\b[,.!]?[ \t]*(?:\n\s*)?[-–—]?\s*({FULL_NAME})[ \t]*$", re.MULTILINE),
    re.compile(rf"\b(?:Mr|Mrs|Ms|Miss|Dr|Mx)\.?\s+({FULL_NAME})"),
    re.compile(rf"\n[ \t]*[-–—~]?[ \t]*({FULL_NAME})[ \t]*\s*\Z"),  # a last line that is only a name
)
NOT_NAMES = {"support", "team", "the", "there", "all", "everyone", "again", "so", "much", "a", "lot", "you",
             "customer", "sir", "madam", "friend", "folks", "guys", "morning", "afternoon", "evening", "here",
             "i", "we", "thanks", "regards", "best", "hello", "hi", "help", "desk", "billing", "sales", "it"}

CARD = re.compile(
    r"(?:\b(?:ending|ends)(?:\s+(?:in|with))?|\blast\s+(?:four|4)(?:\s+digits)?(?:\s+(?:are|is|of|being))?|"
    r"(?:[*•xX]{2,}[\s-]?){1,3}|\b(?:visa|mastercard|amex|card|debit|credit)(?:\s+card)?(?:\s+(?:no\.?|number|#))?)"
    r"[\s:#-]*\d{4}\b", re.IGNORECASE)
ID_WORDS = (r"order|account|acct|invoice|customer|member|membership|reference|ref|booking|confirmation|tracking|"
            r"case|subscription|transaction|receipt|policy|contract|client|user|loyalty|shipment|parcel|rma|ticket")
IDENTIFIER = re.compile(
    rf"\b({ID_WORDS})(\s*(?:no\.?|nr\.?|number|num|id|#)?\s*(?:is|was|:|#|=)?\s*)#?([A-Z0-9][A-Z0-9-]*\d[A-Z0-9-]*)\b",
    re.IGNORECASE)
HASH_NUMBER = re.compile(r"#\s?[A-Z]{0,4}-?\d{3,}\b", re.IGNORECASE)
STREET_TYPES = (r"street|st|avenue|ave|road|rd|boulevard|blvd|lane|ln|drive|dr|court|ct|way|place|pl|terrace|"
                r"close|crescent|square|sq|parkway|pkwy|highway|hwy|straße|strasse|str|weg|gasse|platz|row|"
                r"mews|grove|gardens|hill|walk|circle|cir|trail|alley")
STREET = re.compile(
    rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:[A-Z0-9][\w'’.-]*\s+){{1,4}}(?i:{STREET_TYPES})\b\.?"
    r"(?:,?\s+(?i:apt|apartment|suite|ste|unit|flat|floor|fl)\.?\s*#?\s*\w+)?"
    r"(?:,?\s*(?:[A-Z]{2}\s+\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}|\d{5}\s+[A-Z][a-zà-ÿ]+"
    r"|(?<=,)\s*[A-Z][a-zà-ÿ'’.-]+(?:\s+[A-Z][a-zà-ÿ'’.-]+){0,2})){0,4}")
# Number after the street ("Hauptstraße 12") or a Latin street word before the name ("17 Rue de Rivoli").
EU_STREET = re.compile(
    r"\b[A-ZÀ-Ý][\w'’.-]*(?i:straße|strasse|str\.|weg|gasse|platz|allee|ring|damm|laan|straat|gade|vej|gatan)"
    r"\s+\d{1,4}[a-z]?\b")
LATIN_STREET = re.compile(
    r"\b\d{1,4},?\s+(?i:rue|avenue|boulevard|bd|place|chemin|via|calle|avenida|rua|piazza|plaza)\s+"
    r"(?:(?:de|du|des|la|le|del|della|di|da|do)\s+)*[A-ZÀ-Ý][\w'’-]*")
UNIT = re.compile(r"\b(?:apt|apartment|suite|ste|unit|flat)\.?\s*#?\s*\d+[A-Za-z]?\b,?", re.IGNORECASE)
PO_BOX = re.compile(r"\bP\.?\s?O\.?\s+Box\s+\d+\b", re.IGNORECASE)
US_ZIP = re.compile(r"\b[A-Z]{2}\s+\d{5}(?:-\d{4})?\b")
UK_POSTCODE = re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}\b")
# A German or French postcode before a city: "10115 Berlin", "75008 Paris".
EU_POSTCODE = re.compile(r"\b\d{5}\s+[A-Z][a-zà-ÿ]+\b")


def introduced_names(text: str) -> list[str]:
    """Names the text gives: "Maria here", "Hi Maria,", "Best, Agnes", "my name is Maria Lopez", "Mr. Lopez"."""
    found: list[str] = []
    for pattern in INTRODUCED:
        for match in pattern.finditer(text):
            found += [word for word in re.split(r"\s+", match.group(1)) if word.lower() not in NOT_NAMES]
    return found


def name_parts(names: Iterable[str]) -> list[str]:
    """Every word of the names worth removing (two letters or more, not a common word), longest first."""
    parts = {part for name in names for part in re.split(r"[\s,.;:()<>\"']+", name or "")
             if len(part) >= 2 and part.lower() not in NOT_NAMES and not part.isdigit() and "@" not in part}
    return sorted(parts, key=lambda part: (-len(part), part))


def remove_names(text: str, names: Sequence[str]) -> str:
    """Each name (any case, whole words) replaced by ``[name]``."""
    for part in names:
        text = re.sub(rf"(?<![\w@.]){re.escape(part)}(?![\w@])", "[name]", text, flags=re.IGNORECASE)
    text = re.sub(rf"\[name\][ \t]+{NAME_WORD}\b", "[name]", text)  # a surname after a known first name
    text = re.sub(r"\[name\](?:[\s,]*\[name\])+", "[name]", text)
    return re.sub(r"(?:^|(?<=[.!?]\s))\[name\]\s+here\b[.,!]?\s*", "", text, flags=re.MULTILINE)


def _without_sign_off(text: str) -> str:
    """The text cut at the last sign-off line among its last SIGN_OFF_LINES non-empty lines (never the first):
    the last, so "Thanks for writing!" near the top of a short reply is not taken for the sign-off."""
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    for index in reversed(filled[-SIGN_OFF_LINES:]):
        if index != filled[0] and SIGN_OFF_LINE.match(lines[index]):
            return "\n".join(lines[:index])
    return text


# A last line that is only a name ("Maria Lopez", "- Agnes"): a signature without a sign-off.
NAME_LINE = re.compile(rf"\n[ \t]*[-–—~]?[ \t]*{FULL_NAME}[ \t]*\s*\Z")


def remove_greetings_and_sign_offs(text: str) -> str:
    """Greeting lines, a greeting opening the text, the sign-off and the signature block after it."""
    text = NAME_LINE.sub("", _without_sign_off(SIGNATURE_DELIMITER.sub("", text).rstrip()))
    text = GREETING_LINE.sub("", text)
    return GREETING_PREFIX.sub("", text, count=1)


def remove_identifiers(text: str) -> str:
    """Card fragments, order and account numbers, postal addresses."""
    text = CARD.sub(lambda m: re.sub(r"\d{4}$", "[card]", m.group()), text)
    text = IDENTIFIER.sub(lambda m: f"{m.group(1)}{m.group(2)}[number]", text)
    text = HASH_NUMBER.sub("[number]", text)
    for pattern in (PO_BOX, STREET, EU_STREET, LATIN_STREET, UNIT, US_ZIP, UK_POSTCODE, EU_POSTCODE):
        text = pattern.sub("[address]", text)
    return re.sub(r"\[address\](?:[\s,]*\[address\])+", "[address]", text)
