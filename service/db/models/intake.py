"""Inbound e-mail's own state: where the IMAP poller is in each folder it fetches (migrations 0021, 0034)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base


class ImapFolder(Base):
    """One mailbox folder the poller reads: its UIDVALIDITY and the highest UID already stored."""

    __tablename__ = "imap_folders"

    account: Mapped[str] = mapped_column(sa.Text, primary_key=True)  # user@host:port
    folder: Mapped[str] = mapped_column(sa.Text, primary_key=True)
    # NULL until the folder is first selected (a pass that failed before it only recorded its poll_error).
    uidvalidity: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    last_uid: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, server_default="0")
    # The highest UID present when the folder was first seen (or its UIDVALIDITY changed): under the \Seen
    # policy, read mail at or below it was there before the service and is not taken.
    baseline_uid: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, server_default="0")
    failed_uid: Mapped[int | None] = mapped_column(sa.BigInteger, nullable=True)
    failed_attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    last_error: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    # Migration 0034: the poller's last failed pass (connection, TLS, login …) until a pass succeeds.
    poll_error: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    poll_failures: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    poll_error_since: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    poll_retry_at: Mapped[datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False,
                                                 server_default=sa.func.now())
