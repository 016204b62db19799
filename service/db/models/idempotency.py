"""``reply_idempotency_keys`` (migration 0028): the first result of each ``Idempotency-Key`` a reply was sent with."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base


class ReplyIdempotencyKey(Base):
    """A reply request's key on one ticket: its fingerprint and, once committed, the response it got."""

    __tablename__ = "reply_idempotency_keys"

    ticket_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"),
                                           primary_key=True)
    key: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(sa.Text, nullable=False)  # SHA-256 of the request's fields
    status: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    response: Mapped[dict | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False,
                                                 server_default=sa.func.now())
