"""The team's labels (issue 34 item 4) and calibration from them (item 5): reviews, the review queue's uniform
sample, refitting, and the status GET /api/gate reports. Use cases take a session and never commit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import AnswerFeedback, GateCalibration, GateReview, Ticket, TicketDraft, WidgetMessage
from service.gate.calibrator import fit_calibrator, load_default_calibrator, load_default_threshold
from service.gate.features import Features
from service.gate.memory import OFF, ReviewedQuestion, effective_score, leave_one_out_verdicts
from service.gate.state import active_gate
from service.gate.thresholds import choose_threshold, curve_point, precision_curve

REVIEWABLE = ("answered", "needs_agent")
MIN_LABELS = 60  # below this many reviewed tickets (or MIN_EACH of either verdict) the default calibrator stays
MIN_EACH = 10


class GateTicketNotFound(LookupError):
    """No ticket with that id."""


class NotReviewable(ValueError):
    """The ticket has no gate decision yet (still being answered, or failed)."""


@dataclass(frozen=True)
class Label:
    """A reviewed ticket: the evidence features at answer time and the verdict."""

    ticket_id: int
    features: Features
    correct: bool
    vector: np.ndarray | None = None  # the question's unit vector (ticket_vectors), for the reviewed neighbours
    article_id: tuple[int, str] | None = None  # the rank-1 article the verdict is about, with its text's digest


def record_review(session: Session, ticket_id: int, correct: bool, reviewer: str | None) -> dict:
    """Label what the AI answered, or for a handed-off ticket what it would have answered (the rank-1 article);
    a second review replaces the first."""
    ticket = session.get(Ticket, ticket_id)
    if ticket is None:
        raise GateTicketNotFound(ticket_id)
    if ticket.status not in REVIEWABLE or not ticket.gate:
        raise NotReviewable(f"ticket {ticket_id} is {ticket.status}: only an answered or handed-off ticket is "
                            "reviewed")
    values = {"ticket_id": ticket_id, "answer_correct": correct, "reviewer": reviewer,
              "answered": ticket.status == "answered", "confidence": ticket.gate.get("confidence")}
    statement = insert(GateReview).values(**values)
    session.execute(statement.on_conflict_do_update(
        index_elements=[GateReview.ticket_id],
        set_={**{k: statement.excluded[k] for k in values if k != "ticket_id"}, "created_at": sa.func.now()}))
    return values


LABELS_SQL = sa.text("""
    SELECT r.ticket_id, r.answer_correct, t.gate, c.article_id, v.embedding AS vector,
           md5(coalesce(av.title, '') || chr(1) || coalesce(av.content, '')) AS text_key
    FROM gate_reviews r
    JOIN tickets t ON t.id = r.ticket_id
    LEFT JOIN ticket_citations c ON c.ticket_id = r.ticket_id AND c.rank = 1
    LEFT JOIN article_versions av ON av.article_id = c.article_id AND av.number = c.article_version
    LEFT JOIN ticket_vectors v ON v.ticket_id = r.ticket_id AND v.embedding_model = :model
    ORDER BY r.ticket_id
""")


def team_labels(session: Session, model: str | None = None) -> list[Label]:
    """Every reviewed ticket whose gate recorded features, with its question's vector of ``model`` (if stored)."""
    rows = session.execute(LABELS_SQL, {"model": model or ""}).all()
    return [Label(row.ticket_id, Features.from_dict(row.gate["features"]), row.answer_correct,
                  _unit(row.vector), (row.article_id, row.text_key) if row.article_id is not None else None)
            for row in rows if row.gate and row.gate.get("features")]


def _unit(stored) -> np.ndarray | None:
    """A stored halfvec (pgvector's HalfVector, registered on every connection) as a unit float32 vector."""
    if stored is None:
        return None
    vector = np.asarray(stored.to_numpy(), dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else None


def label_scores(labels: list[Label], calibrator, match_similarity: float) -> list[float]:
    """What the gate compares with its threshold for each reviewed ticket: the calibrated confidence, or the
    verdict of its nearest other reviewed neighbour (service.gate.memory), as answering would have used it."""
    verdicts = leave_one_out_verdicts(
        [ReviewedQuestion(l.ticket_id, l.vector, l.article_id, l.correct) for l in labels], match_similarity)
    return [effective_score(calibrator.confidence(l.features), verdict) for l, verdict in zip(labels, verdicts)]


def labels_needed(labels: list[Label]) -> int:
    """How many more reviews a team calibration needs (0: enough)."""
    right = sum(label.correct for label in labels)
    return max(MIN_LABELS - len(labels), MIN_EACH - right, MIN_EACH - (len(labels) - right), 0)


def calibrate(session: Session, *, target: float, confidence: float, actor: str | None, model: str | None = None,
              match_similarity: float = OFF) -> GateCalibration:
    """Refit on the team's reviews and choose the threshold for ``target``; with too few reviews, keep the default
    calibrator (the row says how many more are needed). Every call adds a row: the audit log. With ``model`` (the
    embedder's), the thresholds are judged with the reviewed-neighbour rule at ``match_similarity``, leave one
    out, as answering applies it."""
    labels = team_labels(session, model)
    needed = labels_needed(labels)
    if needed:
        calibrator, threshold, source = load_default_calibrator(), load_default_threshold(), "default"
        summary = {"labels_needed": needed, "target_met": None,
                   "message": f"{len(labels)} reviewed tickets: {needed} more needed before the team's own "
                              "calibration; the default calibrator stays"}
    else:
        calibrator = fit_calibrator([l.features for l in labels], [l.correct for l in labels], source="team")
        scores = label_scores(labels, calibrator, match_similarity)
        choice = choose_threshold(scores, [l.correct for l in labels], target=target, confidence=confidence)
        threshold, source = (choice.threshold if choice.threshold is not None else 1.0), "team"
        summary = {"labels_needed": 0, "target_met": choice.target_met,
                   "message": "the lower bound reaches the target" if choice.target_met else
                   "no threshold's lower bound reaches the target with these reviews: the gate keeps to its "
                   "most confident share (the best-supported threshold no looser than the first one tested)"}
    row = GateCalibration(actor=actor, source=source, target_precision=target, confidence_level=confidence,
                          threshold=threshold, labels=len(labels), calibrator=calibrator.to_dict(), summary=summary)
    session.add(row)
    session.flush()
    return row


def label_counts(session: Session) -> dict[str, int]:
    """Labels by source: reviews (used); customer feedback on tickets and in the chat widget, and used drafts (shown
    beside them, not used)."""
    reviews = session.scalar(sa.select(sa.func.count()).select_from(GateReview)) or 0
    feedback = session.scalar(sa.select(sa.func.count()).select_from(AnswerFeedback)) or 0
    drafts = session.scalar(sa.select(sa.func.count()).select_from(TicketDraft)
                            .where(TicketDraft.used_by_message_id.is_not(None))) or 0
    widget = session.scalar(sa.select(sa.func.count()).select_from(WidgetMessage)
                            .where(WidgetMessage.helpful.is_not(None))) or 0
    return {"reviews": reviews, "customer_feedback": feedback, "widget_feedback": widget, "drafts_used": drafts}


def gate_status(session: Session, *, default_target: float, default_confidence: float, model: str | None = None,
                match_similarity: float = OFF) -> dict:
    """What GET /api/gate returns: the gate in force, its estimate on the team's reviews (with the reviewed-neighbour
    rule, leave one out, when ``model`` is given), and the curve."""
    gate = active_gate(session)
    row = gate.calibration
    target = row.target_precision if row else default_target
    level = row.confidence_level if row else default_confidence
    labels = team_labels(session, model)
    scores = label_scores(labels, gate.calibrator, match_similarity)
    correct = [l.correct for l in labels]
    point = curve_point(scores, correct, gate.threshold, level) if labels else None
    return {
        "target_precision": target, "confidence_level": level, "threshold": gate.threshold,
        "labels": len(labels), "labels_needed": labels_needed(labels), "label_sources": label_counts(session),
        "source": gate.source, "estimated_precision": point.precision if point else None,
        "precision_lower_bound": point.precision_lower_bound if point else None,
        "coverage": point.coverage if point else None,
        "calibrated_at": row.created_at.isoformat() if row else None,
        "message": (row.summary or {}).get("message") if row else None,
        "curve": [p.to_dict() for p in precision_curve(scores, correct, level)[4::5]] if labels else [],
        "review_matches_30d": review_matches(session, days=30),
    }


# A ticket's place in the uniform sample: a hash of its id, so the draw never depends on what it says or who
# opened it, and a ticket stays in (or out of) the sample whenever the queue is read.
SAMPLE_QUEUE_SQL = sa.text("""
    SELECT t.id, t.subject, t.body, t.status, (t.gate ->> 'confidence')::float AS confidence,
           c.article_id, c.article_title, c.section_label,
           (SELECT f.helpful FROM answer_feedback f WHERE f.ticket_id = t.id ORDER BY f.id DESC LIMIT 1)
               AS customer_helpful
    FROM tickets t
    LEFT JOIN ticket_citations c ON c.ticket_id = t.id AND c.rank = 1
    WHERE t.status IN ('answered', 'needs_agent') AND t.gate ? 'features'
      AND NOT EXISTS (SELECT 1 FROM gate_reviews r WHERE r.ticket_id = t.id)
      AND ('x' || substr(md5('review-sample:' || t.id::text), 1, 8))::bit(32)::bigint / 4294967296.0 < :rate
    ORDER BY t.id DESC
    LIMIT :limit
""")


@dataclass(frozen=True)
class QueuedTicket:
    """A sampled, not yet reviewed ticket and the article the AI answered (or would have answered) from."""

    ticket_id: int
    subject: str
    body: str
    status: str
    confidence: float | None
    article_id: int | None
    article_title: str | None
    section_label: str | None
    customer_helpful: bool | None  # the customer's own verdict, shown beside the review (never used as a label)


def review_queue(session: Session, *, rate: float, limit: int) -> list[QueuedTicket]:
    """The uniform random sample (share ``rate``) of answered and handed-off tickets awaiting a review."""
    rows = session.execute(SAMPLE_QUEUE_SQL, {"rate": rate, "limit": limit}).all()
    return [QueuedTicket(*row) for row in rows]


def answered_share(session: Session, *, days: int = 30) -> tuple[int, int]:
    """(answered by the AI, answered or handed off) over the last ``days``."""
    row = session.execute(sa.select(
        sa.func.count().filter(Ticket.status == "answered"), sa.func.count())
        .where(Ticket.status.in_(REVIEWABLE),
               Ticket.created_at >= sa.func.now() - sa.func.make_interval(0, 0, 0, days))).one()
    return int(row[0]), int(row[1])


def review_matching(runtime) -> dict:
    """The reviewed-neighbour rule's arguments for ``calibrate`` and ``gate_status`` from a runtime: its embedder's
    model and ``REVIEW_MATCH_SIMILARITY`` (only under ``ANSWER_GATE=calibrated``, where answering applies it)."""
    if runtime.settings.answer_gate != "calibrated":
        return {}
    return {"model": runtime.embedder.model_name, "match_similarity": runtime.settings.review_match_similarity}


def review_matches(session: Session, *, days: int) -> dict[str, int]:
    """Tickets of the last ``days`` a reviewed neighbour decided (service.gate.memory): answered, handed off."""
    row = session.execute(sa.select(
        sa.func.count().filter(Ticket.gate["review_match"]["answer_correct"].as_boolean().is_(True)),
        sa.func.count().filter(Ticket.gate["review_match"]["answer_correct"].as_boolean().is_(False)))
        .where(Ticket.gate.has_key("review_match"),
               Ticket.created_at >= sa.func.now() - sa.func.make_interval(0, 0, 0, days))).one()
    return {"answered": int(row[0]), "handed_off": int(row[1])}
