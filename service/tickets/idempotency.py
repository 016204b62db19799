"""``Idempotency-Key`` for replies: the same key on the same ticket returns the first result, and two requests
racing with one key make one message.

The key is claimed by inserting its row in the reply's own transaction. A second request with the key waits on
the unique index until the first commits (then it reads the stored response) or rolls back (then it claims the
key itself): PostgreSQL's ``INSERT … ON CONFLICT DO NOTHING`` does that waiting.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import ReplyIdempotencyKey
from service.validation import ValidationError

KEY_MAX = 255


class KeyReused(ValueError):
    """The key was already used on this ticket for a different request."""


@dataclass(frozen=True)
class StoredResponse:
    """What the first request with the key answered."""

    status: int
    body: dict[str, Any]


def check_key(key: str) -> str:
    """The header's value, or a ValidationError (1–255 visible ASCII characters)."""
    if not (1 <= len(key) <= KEY_MAX) or not all(33 <= ord(ch) <= 126 for ch in key):
        raise ValidationError("invalid Idempotency-Key", {"Idempotency-Key": f"1 to {KEY_MAX} visible ASCII characters"})
    return key


def fingerprint(fields: dict[str, Any]) -> str:
    """SHA-256 of the request's fields, keys sorted: the same reply sent again has the same fingerprint."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def claim_key(session: Session, ticket_id: int, key: str, print_: str) -> StoredResponse | None:
    """Claim ``key`` for this request (None: go on and reply), or the first request's stored response."""
    claimed = session.execute(insert(ReplyIdempotencyKey).values(ticket_id=ticket_id, key=key, fingerprint=print_)
                              .on_conflict_do_nothing().returning(ReplyIdempotencyKey.key)).scalar()
    if claimed is not None:
        return None
    row = session.execute(sa.select(ReplyIdempotencyKey.fingerprint, ReplyIdempotencyKey.status,
                                    ReplyIdempotencyKey.response)
                          .where(ReplyIdempotencyKey.ticket_id == ticket_id, ReplyIdempotencyKey.key == key)).one()
    if row.fingerprint != print_:
        raise KeyReused(f"Idempotency-Key {key!r} was used on this ticket for a different reply")
    return StoredResponse(row.status, row.response)


def record_response(session: Session, ticket_id: int, key: str, status: int, body: dict[str, Any]) -> None:
    """Keep the response with the claimed key, committed with the reply."""
    session.execute(sa.update(ReplyIdempotencyKey)
                    .where(ReplyIdempotencyKey.ticket_id == ticket_id, ReplyIdempotencyKey.key == key)
                    .values(status=status, response=body))
