"""The OpenAPI operations and schemas of the calibrated answer gate (service/web/gate.py), kept beside the rest."""

from __future__ import annotations

from typing import Any, Callable

from service.web.openapi_schemas import BOOLEAN, INTEGER, NUMBER, STRING, nullable, obj, ref

POINT = obj({"threshold": NUMBER, "answered": INTEGER, "right": INTEGER, "precision": nullable(NUMBER),
             "precision_lower_bound": nullable(NUMBER), "coverage": NUMBER},
            ["threshold", "precision", "precision_lower_bound", "coverage"])

GATE_SCHEMAS: dict[str, Any] = {
    "ReviewRequest": obj({"answer_correct": BOOLEAN}, ["answer_correct"], closed=True),
    "Review": obj({"review": obj({"ticket_id": INTEGER, "answer_correct": BOOLEAN, "reviewer": nullable(STRING),
                                  "answered": BOOLEAN, "confidence": nullable(NUMBER)},
                                 ["ticket_id", "answer_correct", "answered"])}, ["review"]),
    "CalibrateRequest": obj({"target_precision": {"type": "number", "exclusiveMinimum": 0.5,
                                                  "exclusiveMaximum": 0.999},
                             "confidence_level": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1}},
                            ["target_precision"], closed=True),
    "GateStatus": obj({
        "target_precision": NUMBER, "confidence_level": NUMBER, "threshold": NUMBER, "labels": INTEGER,
        "labels_needed": INTEGER, "source": {"enum": ["default", "team"]},
        "label_sources": obj({"reviews": INTEGER, "customer_feedback": INTEGER, "widget_feedback": INTEGER,
                              "drafts_used": INTEGER}),
        "estimated_precision": nullable(NUMBER), "precision_lower_bound": nullable(NUMBER),
        "coverage": nullable(NUMBER), "calibrated_at": nullable(STRING), "message": nullable(STRING),
        "calibration_id": INTEGER, "curve": {"type": "array", "items": POINT},
        "review_matches_30d": obj({"answered": INTEGER, "handed_off": INTEGER})},
        ["target_precision", "confidence_level", "threshold", "labels", "source", "estimated_precision",
         "precision_lower_bound", "coverage", "curve"]),
    "ReviewQueue": obj({"tickets": {"type": "array", "items": obj({
        "ticket_id": INTEGER, "subject": STRING, "body": STRING, "status": STRING, "confidence": nullable(NUMBER),
        "article_id": nullable(INTEGER), "article_title": nullable(STRING), "section_label": nullable(STRING),
        "customer_helpful": nullable(BOOLEAN), "answer": nullable(STRING)}, ["ticket_id", "status"])}}, ["tickets"]),
}


def gate_operations(query: Callable[..., dict], path_id: Callable[[str], dict]) -> list[tuple]:
    """The gate's operations in OPERATIONS' tuple form."""
    return [
        ("/api/tickets/{ticket_id}/review", "post", "gate_api.review",
         "Label the AI's answer (or, handed off, its would-be answer) right or wrong; a second review replaces "
         "the first", "ReviewRequest", ("200", "Review"), [path_id("ticket_id")]),
        ("/api/gate/calibrate", "post", "gate_api.calibrate_gate",
         "Refit the gate on the reviews and choose the threshold for a target precision (Clopper–Pearson, "
         "fixed-sequence)", "CalibrateRequest", ("200", "GateStatus"), []),
        ("/api/gate", "get", "gate_api.gate_show", "The answer gate: target, threshold, labels, the curve", None,
         ("200", "GateStatus"), []),
        ("/api/gate/review-queue", "get", "gate_api.queue", "Sampled answered and handed-off tickets awaiting a "
         "review", None, ("200", "ReviewQueue"),
         [query("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "at most this many")]),
    ]
