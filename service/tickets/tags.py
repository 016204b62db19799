"""Tags on tickets: short lower-case labels an agent sets in the workspace and filters the list by."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import TAG_PATTERN, TicketTag
from service.tickets.work import work_ticket
from service.validation import ValidationError

TAGS_MAX = 20
_TAG = re.compile(TAG_PATTERN)


def clean_tags(raw: Any) -> list[str]:
    """A list of tags: each trimmed and lower-cased, 1-40 of ``a-z 0-9 _ -``; duplicates dropped, order kept."""
    if not isinstance(raw, list) or len(raw) > TAGS_MAX:
        raise ValidationError("invalid tags", {"tags": f"must be a list of at most {TAGS_MAX} tags"})
    tags = [t.strip().lower() if isinstance(t, str) else t for t in raw]
    bad = [t for t in tags if not isinstance(t, str) or not _TAG.fullmatch(t)]
    if bad:
        raise ValidationError("invalid tags", {"tags": "each tag: 1-40 of a-z, 0-9, '_' or '-', starting with a "
                                                       f"letter or digit (refused: {bad[:3]!r})"})
    return list(dict.fromkeys(tags))


def parse_tag_text(text: str) -> list[str]:
    """Tags as typed in the workspace: separated by commas or spaces."""
    return [t for t in re.split(r"[,\s]+", text or "") if t]


def ticket_tags(session: Session, ticket_ids: list[int]) -> dict[int, list[str]]:
    """Each ticket's tags, sorted (one query)."""
    found: dict[int, list[str]] = {i: [] for i in ticket_ids}
    for ticket_id, tag in session.execute(sa.select(TicketTag.ticket_id, TicketTag.tag)
                                          .where(TicketTag.ticket_id.in_(ticket_ids)).order_by(TicketTag.tag)):
        found[ticket_id].append(tag)
    return found


def set_tags(session: Session, ticket_id: int, raw: Any) -> list[str]:
    """Replace the ticket's tags with ``raw`` (a list); returns them sorted."""
    tags = clean_tags(raw)
    work_ticket(session, ticket_id, lock=True)  # racing edits take turns: the last one wins, whole
    session.execute(sa.delete(TicketTag).where(TicketTag.ticket_id == ticket_id, TicketTag.tag.not_in(tags)))
    if tags:  # an upsert: a tag another writer just added is no unique violation
        session.execute(insert(TicketTag).values([{"ticket_id": ticket_id, "tag": t} for t in tags])
                        .on_conflict_do_nothing())
    session.flush()
    return sorted(tags)
