"""Reading headers as sent: raw strings (``compat32``), raw UTF-8 read as UTF-8, each capped before decoding."""

from __future__ import annotations

import email.errors
import email.header
from email.message import Message
from email.utils import getaddresses

from service.mail.compose import one_line

HEADER_READ_MAX = 16_384  # characters of one header read: decode_header is quadratic in encoded words (13 s at 1 MiB)


def raw_headers(message: Message, name: str) -> list[str]:
    """Every ``name`` header as sent; raw UTF-8 bytes (RFC 6532, SMTPUTF8), which compat32 keeps as surrogates (and
    would hand out as an unknown-8bit Header), read as UTF-8."""
    values = []
    for key, value in message.raw_items():
        if key.lower() == name.lower():
            text = str(value)
            try:
                text = text.encode("ascii", "surrogateescape").decode("utf-8", "replace")
            except UnicodeError:  # not from bytes: as it is
                pass
            values.append(text)
    return values


def header_text(message: Message, name: str) -> str:
    """A header's decoded text on one line ("" if absent); undecodable words are kept as sent."""
    found = raw_headers(message, name)
    if not found:
        return ""
    raw = found[0][:HEADER_READ_MAX]
    try:
        decoded = str(email.header.make_header(email.header.decode_header(raw)))
    except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
        decoded = raw
    return one_line(decoded.encode("utf-8", "replace").decode("utf-8"))


def addresses(message: Message, *names: str) -> list[str]:
    """The addr-specs in these headers, read from the raw value (encoded display names cannot inject anything)."""
    values = [one_line(value[:HEADER_READ_MAX]) for name in names for value in raw_headers(message, name)]
    try:
        pairs = getaddresses(values)
    except (ValueError, IndexError, RecursionError):  # 600 nested "(" exhaust getaddresses' recursion
        return []
    return [one_line(address) for _, address in pairs if address and "@" in address]
