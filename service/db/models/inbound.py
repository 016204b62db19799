"""Inbound e-mail as received (migration 0019): stored before it is parsed, so nothing is lost (service.intake)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

# received: stored, not yet handled; processed: a ticket or follow-up; ignored: automatic mail; duplicate: another
# copy already handled; quarantined: could not become a ticket (an admin retries or discards it); discarded.
INBOUND_STATUSES = ("received", "processed", "ignored", "duplicate", "quarantined", "discarded")


class InboundEmail(Base):
    """One received e-mail: its raw bytes (capped), SHA-256, dedupe key, and what became of it."""

    __tablename__ = "inbound_emails"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    received_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False,
                                                  server_default=sa.func.now())
    # The Message-ID, else "sha256:<hex>" of the raw bytes: a relay's retry or a webhook replay is stored once.
    dedupe_key: Mapped[str] = mapped_column(sa.Text, nullable=False)
    message_id: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    sha256: Mapped[str] = mapped_column(sa.Text, nullable=False)
    size: Mapped[int] = mapped_column(sa.Integer, nullable=False)  # of the whole message, before the cap
    raw: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False, deferred=True)
    raw_truncated: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, server_default=sa.false())
    sender: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    subject: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    cc: Mapped[list[str] | None] = mapped_column(ARRAY(sa.Text), nullable=True)
    status: Mapped[str] = mapped_column(sa.Text, nullable=False, server_default="received")
    reason: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    ticket_id: Mapped[int | None] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"),
                                                  nullable=True)
    # The ticket the message claimed to answer when its sender did not match it ("sender does not match T-n").
    related_ticket_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="SET NULL"), nullable=True)
    processed_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)

    __table_args__ = (
        sa.CheckConstraint(sa.column("status").in_(INBOUND_STATUSES), name="inbound_emails_status_valid"),
        sa.Index("inbound_emails_dedupe_key", "dedupe_key", unique=True),
        sa.Index("inbound_emails_ticket", "ticket_id"),
        sa.Index("inbound_emails_open", "status", "id",
                 postgresql_where=sa.text("status IN ('received', 'quarantined')")),
    )
