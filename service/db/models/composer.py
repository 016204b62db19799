"""``ticket_composer_texts`` (migration 0022): an agent's unsent reply text per ticket, saved as typed."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base


class ComposerText(Base):
    """What one agent has typed in one ticket's reply box and not sent yet (deleted when the reply is sent)."""

    __tablename__ = "ticket_composer_texts"

    ticket_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"),
                                           primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="CASCADE"),
                                         primary_key=True)
    body: Mapped[str] = mapped_column(sa.Text, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False,
                                                 server_default=sa.func.now())
