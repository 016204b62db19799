"""HTTP API of the calibrated answer gate (issue 34): reviews, calibration, status, the review queue."""

from __future__ import annotations

from dataclasses import asdict

import sqlalchemy as sa
from flask import Blueprint, g, jsonify

from service.db.models import Article, TicketAnswer
from service.gate.reviews import GateTicketNotFound, NotReviewable, calibrate, gate_status, record_review, \
    review_matching, review_queue
from service.tickets.answering import extractive_answer
from service.web.errors import ApiError
from service.web.requests import db, int_arg, json_body, runtime

gate_api = Blueprint("gate_api", __name__, url_prefix="/api")
TARGET_LOW, TARGET_HIGH = 0.5, 0.999


def _reviewer() -> str | None:
    identity = g.get("identity")
    return f"{identity.kind if identity.kind == 'token' else 'admin'}:{identity.name}" if identity else None


@gate_api.post("/tickets/<int:ticket_id>/review")
def review(ticket_id: int):
    """``{answer_correct}`` → 200: the team's verdict on the answer (or, handed off, the would-be answer)."""
    body = json_body(("answer_correct",))
    correct = body.get("answer_correct")
    if not isinstance(correct, bool):
        raise ApiError(400, "validation_error", "answer_correct must be true or false",
                       {"answer_correct": "is required and must be a boolean"})
    try:
        saved = record_review(db(), ticket_id, correct, _reviewer())
    except GateTicketNotFound:
        raise ApiError(404, "not_found", f"ticket {ticket_id} not found") from None
    except NotReviewable as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    db().commit()
    return jsonify({"review": saved})


def _fraction(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
        raise ApiError(400, "validation_error", f"{name} must be a number between {low} and {high} (exclusive)",
                       {name: f"must be between {low} and {high} (exclusive)"})
    return float(value)


@gate_api.post("/gate/calibrate")
def calibrate_gate():
    """``{target_precision, confidence_level?}`` → 200: refit on the reviews and choose the threshold."""
    settings = runtime().settings
    body = json_body(("target_precision", "confidence_level"))
    if "target_precision" not in body:
        raise ApiError(400, "validation_error", "target_precision is required",
                       {"target_precision": "is required"})
    target = _fraction(body, "target_precision", settings.answer_target_precision, TARGET_LOW, TARGET_HIGH)
    level = _fraction(body, "confidence_level", settings.answer_confidence_level, 0.499, 1.0)
    row = calibrate(db(), target=target, confidence=level, actor=_reviewer(), **review_matching(runtime()))
    db().commit()
    return jsonify(_status() | {"calibration_id": row.id})


def _status() -> dict:
    settings = runtime().settings
    return gate_status(db(), default_target=settings.answer_target_precision,
                       default_confidence=settings.answer_confidence_level, **review_matching(runtime()))


@gate_api.get("/gate")
def gate_show():
    """The gate in force: target, threshold, labels, source, estimated precision and its bound, the curve."""
    return jsonify(_status())


def would_be_answer(ticket_id: int, status: str, article_id: int | None, query: str) -> str | None:
    """What the customer got, or for a handed-off ticket what the rank-1 article would have answered."""
    if status == "answered":
        return db().scalar(sa.select(TicketAnswer.answer).where(TicketAnswer.ticket_id == ticket_id)
                           .order_by(TicketAnswer.id.desc()).limit(1))
    article = db().get(Article, article_id) if article_id else None
    return extractive_answer(article.title, article.content, query) if article else None


@gate_api.get("/gate/review-queue")
def queue():
    """The uniform sample of answered and handed-off tickets not yet reviewed (REVIEW_SAMPLE_RATE)."""
    limit = int_arg("limit", 20, low=1, high=100)
    rows = review_queue(db(), rate=runtime().settings.review_sample_rate, limit=limit)
    return jsonify({"tickets": [asdict(r) | {"answer": would_be_answer(r.ticket_id, r.status, r.article_id,
                                                                        f"{r.subject}\n\n{r.body}")}
                                for r in rows]})
