"""The calibrated answer gate (migration 0029): the team's reviews of answers and every calibration made."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from service.db.models.base import Base

GATE_SOURCES = ("default", "team")


class GateReview(Base):
    """An agent's verdict on what the AI answered (or would have answered) a ticket; a second one replaces it."""

    __tablename__ = "gate_reviews"

    ticket_id: Mapped[int] = mapped_column(sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"),
                                           primary_key=True)
    answer_correct: Mapped[bool] = mapped_column(sa.Boolean, nullable=False)
    reviewer: Mapped[str | None] = mapped_column(sa.Text, nullable=True)  # "admin:<name>", "token:<name>"
    # The ticket's gate when it was reviewed: answered or handed off, and the confidence then.
    answered: Mapped[bool] = mapped_column(sa.Boolean, nullable=False)
    confidence: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False,
                                                 server_default=sa.func.now())


class GateCalibration(Base):
    """One calibration of the gate (the audit log of its changes); the newest row is in force."""

    __tablename__ = "gate_calibrations"

    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(always=False), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), nullable=False,
                                                 server_default=sa.func.now())
    actor: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    source: Mapped[str] = mapped_column(sa.Text, nullable=False)
    target_precision: Mapped[float] = mapped_column(sa.Float, nullable=False)
    confidence_level: Mapped[float] = mapped_column(sa.Float, nullable=False)
    threshold: Mapped[float] = mapped_column(sa.Float, nullable=False)
    labels: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    calibrator: Mapped[dict] = mapped_column(JSONB, nullable=False)
    summary: Mapped[dict] = mapped_column(JSONB, nullable=False)  # what GET /api/gate reports of this fit

    __table_args__ = (sa.CheckConstraint(sa.column("source").in_(GATE_SOURCES), name="gate_calibrations_source"),)
