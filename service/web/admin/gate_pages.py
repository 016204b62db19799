"""The "AI answers" admin page (issue 34 item 6) and the workspace's review queue."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for

from service.gate.reviews import answered_share, calibrate, gate_status, review_matching, review_queue
from service.web.admin.gate_chart import curve_chart
from service.web.admin.pages import nav_context
from service.web.gate import TARGET_HIGH, TARGET_LOW, would_be_answer
from service.web.requests import db, runtime

admin_gate = Blueprint("admin_gate", __name__, url_prefix="/admin")
admin_gate.context_processor(nav_context)


@admin_gate.get("/ai-answers", endpoint="ai_answers")
def ai_answers():
    """The precision/coverage curve with the operating point, labels by source, the answered share."""
    settings = runtime().settings
    status = gate_status(db(), default_target=settings.answer_target_precision,
                         default_confidence=settings.answer_confidence_level, **review_matching(runtime()))
    chart = curve_chart(status["curve"], coverage=status["coverage"], precision=status["estimated_precision"],
                        target=status["target_precision"])
    answered, total = answered_share(db(), days=30)
    return render_template("admin/ai_answers.html", status=status, chart=chart, answered=answered, total=total,
                           gate_mode=settings.answer_gate, floor=settings.answer_min_similarity,
                           low=TARGET_LOW, high=TARGET_HIGH)


@admin_gate.post("/ai-answers/calibrate", endpoint="ai_answers_calibrate")
def ai_answers_calibrate():
    """The page's form: a new target precision; refit and come back."""
    try:
        target = float(request.form.get("target_precision", ""))
    except ValueError:
        target = -1.0
    if not TARGET_LOW < target < TARGET_HIGH:
        flash(f"The target precision must be between {TARGET_LOW} and {TARGET_HIGH}.", "error")
        return redirect(url_for("admin_gate.ai_answers"))
    identity = nav_context()["identity"]
    row = calibrate(db(), target=target, confidence=runtime().settings.answer_confidence_level,
                    actor=f"admin:{identity.name}" if identity else None, **review_matching(runtime()))
    db().commit()
    flash(f"Calibrated for {target:.3f}: {row.summary.get('message')}", "info")
    return redirect(url_for("admin_gate.ai_answers"))


@admin_gate.get("/reviews", endpoint="review_queue")
def review_queue_page():
    """The sampled tickets awaiting a review: R marks the answer right, W wrong."""
    rows = review_queue(db(), rate=runtime().settings.review_sample_rate, limit=50)
    items = [(r, would_be_answer(r.ticket_id, r.status, r.article_id, f"{r.subject}\n\n{r.body}")) for r in rows]
    return render_template("admin/review_queue.html", items=items,
                           rate=runtime().settings.review_sample_rate)
