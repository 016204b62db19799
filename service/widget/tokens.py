"""Signed, expiring visitor tokens: the visitor's only way back to a conversation (never a guessable id).

A token names a conversation and a generation; only the conversation's current generation works, and resuming
issues the next one, so a token copied before the resume (a replay) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

SALT = "supportrag.widget.visitor"


@dataclass(frozen=True)
class VisitorToken:
    """What a valid token says."""

    conversation_id: int
    generation: int


def _serializer(secret_key: str | bytes) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=SALT)


def issue_token(secret_key: str | bytes, conversation_id: int, generation: int) -> str:
    """A token for this conversation's ``generation``, timestamped for expiry."""
    return _serializer(secret_key).dumps({"c": conversation_id, "g": generation})


def read_token(secret_key: str | bytes, token: str, max_age: int) -> VisitorToken | None:
    """The token's content if its signature holds and it is younger than ``max_age`` seconds; else None."""
    try:
        data = _serializer(secret_key).loads(token, max_age=max_age)
    except (SignatureExpired, BadSignature):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("c"), int) or not isinstance(data.get("g"), int):
        return None
    return VisitorToken(conversation_id=data["c"], generation=data["g"])
