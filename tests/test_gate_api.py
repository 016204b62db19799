"""Issue 34 over HTTP: every ticket's gate carries features and a confidence; reviews, calibration and the gate's
status, with their error cases."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa

from service.accounts import create_token
from service.db.models import GateCalibration
from service.gate.reviews import MIN_LABELS
from service.gate.features import FEATURE_NAMES

ON_TOPIC = ["How do I get a refund for my order?", "Which payment methods do you accept?",
            "Where is my parcel, how can I track my order?", "I forgot my password, how do I reset it?",
            "Your website is not loading in my browser", "Can I pay with PayPal or a credit card?",
            "How long does a refund take to reach my card?", "The tracking number for my shipment does not work"]
OFF_TOPIC = ["Do you have an iPhone app?", "Where are your servers located?", "Are you hiring engineers?",
             "What is the capital of Peru?", "Can I bring my dog to your office?",
             "Do you sponsor football teams?", "Who is your chief executive?", "Is your company carbon neutral?"]


def ask(client, question: str) -> dict:
    response = client.post("/api/tickets", json={"subject": question, "body": question})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_a_ticket_stores_its_evidence_features_and_calibrated_confidence(seeded, client):
    ticket = ask(client, "How do I get a refund for my order?")
    gate = client.get(f"/api/tickets/{ticket['ticket']['id']}").get_json()["ticket"]["gate"]
    assert set(gate["features"]) >= {"top_similarity", "margin", "bm25_score", "bm25_rank", "legs_agree",
                                     "word_overlap", "question_words", "above_floor", "heading_similarity"}
    assert 0.0 <= gate["confidence"] <= 1.0 and gate["calibration"] == "default"
    assert gate["answerable"] == (gate["confidence"] >= gate["threshold"])
    off = ask(client, "Do you have an iPhone app?")
    off_gate = client.get(f"/api/tickets/{off['ticket']['id']}").get_json()["ticket"]["gate"]
    assert off_gate["confidence"] < gate["confidence"]


def test_a_review_is_stored_and_a_second_replaces_the_first(seeded, client, runtime):
    ticket_id = ask(client, "Which payment methods do you accept?")["ticket"]["id"]
    first = client.post(f"/api/tickets/{ticket_id}/review", json={"answer_correct": True})
    assert first.status_code == 200 and first.get_json()["review"]["answer_correct"] is True
    second = client.post(f"/api/tickets/{ticket_id}/review", json={"answer_correct": False})
    assert second.get_json()["review"]["answer_correct"] is False
    with runtime.session() as session:
        rows = session.execute(sa.text("SELECT answer_correct FROM gate_reviews WHERE ticket_id = :t"),
                               {"t": ticket_id}).all()
    assert rows == [(False,)]
    assert client.get("/api/gate").get_json()["label_sources"]["reviews"] == 1


def test_review_errors_unknown_ticket_customer_secret_and_bad_body(seeded, client, anonymous_client):
    created = ask(client, "Which payment methods do you accept?")
    ticket_id, secret = created["ticket"]["id"], created["secret"]
    missing = client.post("/api/tickets/987654321/review", json={"answer_correct": True})
    assert missing.status_code == 404 and missing.get_json()["error"]["code"] == "not_found"
    customer = anonymous_client.post(f"/api/tickets/{ticket_id}/review", json={"answer_correct": True},
                                     headers={"X-Ticket-Secret": secret})
    assert customer.status_code == 401 and customer.get_json()["error"]["code"] == "unauthorized"
    for body in ({"answer_correct": "yes"}, {}, {"answer_correct": 1}, {"answer_correct": True, "x": 1}):
        bad = client.post(f"/api/tickets/{ticket_id}/review", json=body)
        assert bad.status_code == 400 and bad.get_json()["error"]["code"] == "validation_error", body


def test_an_agent_reviews_but_only_an_admin_calibrates(seeded, client, app, runtime):
    ticket_id = ask(client, "Which payment methods do you accept?")["ticket"]["id"]
    with runtime.session() as session:
        _, secret = create_token(session, "agent-script", role="agent")
    agent = app.test_client()
    agent.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    assert agent.post(f"/api/tickets/{ticket_id}/review", json={"answer_correct": True}).status_code == 200
    refused = agent.post("/api/gate/calibrate", json={"target_precision": 0.9})
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "forbidden"
    assert agent.get("/api/gate").status_code == 200


@pytest.mark.parametrize("target", [0.5, 0.999, 0.2, 1.5, "0.9", None, True])
def test_calibrate_refuses_a_target_outside_the_open_interval(client, target):
    response = client.post("/api/gate/calibrate", json={"target_precision": target})
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "validation_error"
    assert "target_precision" in response.get_json()["error"]["details"]


def test_with_too_few_labels_calibrate_keeps_the_default_and_says_how_many_more(seeded, client, runtime):
    for question in ON_TOPIC[:3]:
        ticket_id = ask(client, question)["ticket"]["id"]
        client.post(f"/api/tickets/{ticket_id}/review", json={"answer_correct": True})
    body = client.post("/api/gate/calibrate", json={"target_precision": 0.85}).get_json()
    assert body["source"] == "default" and body["labels"] == 3
    assert body["labels_needed"] == MIN_LABELS - 3 and f"{MIN_LABELS - 3} more" in body["message"]
    assert body["target_precision"] == 0.85  # the admin's choice is recorded in the audit log
    with runtime.session() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(GateCalibration)) == 1


def test_calibration_from_team_reviews_sets_a_threshold_the_next_tickets_use(seeded, client, runtime):
    questions = list(itertools.islice(itertools.cycle(
        [(q, True) for q in ON_TOPIC] + [(q, False) for q in OFF_TOPIC]), MIN_LABELS + 4))
    for n, (question, on_topic) in enumerate(questions):
        ticket_id = ask(client, f"{question} (ref {n})")["ticket"]["id"]
        top = client.get(f"/api/tickets/{ticket_id}").get_json()["ticket"]
        assert client.post(f"/api/tickets/{ticket_id}/review",
                           json={"answer_correct": on_topic}).status_code == 200, top["id"]
    status = client.post("/api/gate/calibrate", json={"target_precision": 0.8}).get_json()
    assert status["source"] == "team" and status["labels"] == len(questions) and status["labels_needed"] == 0
    assert status["target_precision"] == 0.8 and status["curve"]
    assert status["estimated_precision"] >= status["precision_lower_bound"]
    shown = client.get("/api/gate").get_json()
    assert shown["threshold"] == status["threshold"] and shown["source"] == "team"
    coverages = [p["coverage"] for p in shown["curve"]]
    assert coverages == sorted(coverages)
    with runtime.session() as session:
        row = session.scalars(sa.select(GateCalibration).order_by(GateCalibration.id.desc())).first()
        assert row.calibrator["features"] == list(FEATURE_NAMES) and row.actor.startswith("token:")
    after = ask(client, "How do I request a refund?")
    gate = client.get(f"/api/tickets/{after['ticket']['id']}").get_json()["ticket"]["gate"]
    assert gate["calibration"] == "team" and gate["threshold"] == status["threshold"]
    assert gate["answerable"] == (gate["confidence"] >= status["threshold"])


def test_the_review_queue_samples_answered_and_handed_off_tickets_not_yet_reviewed(seeded, client, runtime):
    import dataclasses
    runtime.settings = dataclasses.replace(runtime.settings, review_sample_rate=1.0)
    ids = [ask(client, q)["ticket"]["id"] for q in ON_TOPIC[:2] + OFF_TOPIC[:2]]
    queued = client.get("/api/gate/review-queue").get_json()["tickets"]
    assert {t["ticket_id"] for t in queued} == set(ids)
    assert all(t["answer"] for t in queued)
    assert all(t["customer_helpful"] is None for t in queued)
    client.post(f"/api/tickets/{ids[1]}/feedback", json={"helpful": False})
    shown = {t["ticket_id"]: t for t in client.get("/api/gate/review-queue").get_json()["tickets"]}
    assert shown[ids[1]]["customer_helpful"] is False  # shown beside the review, not counted as one
    assert client.get("/api/gate").get_json()["labels"] == 0
    client.post(f"/api/tickets/{ids[0]}/review", json={"answer_correct": True})
    assert ids[0] not in {t["ticket_id"] for t in client.get("/api/gate/review-queue").get_json()["tickets"]}


def test_the_ai_answers_page_shows_the_answered_share_and_refuses_a_bad_target(seeded, client, admin_client,
                                                                             runtime):
    statuses = [ask(client, q)["ticket"]["status"] for q in ON_TOPIC[:3] + OFF_TOPIC[:3]]
    share = sum(s == "answered" for s in statuses) / len(statuses)
    page = admin_client.get("/admin/ai-answers").get_data(as_text=True)
    assert f'id="answered-share">{share * 100:.1f}%<' in page and 'id="no-curve"' in page
    token = page.split('name="csrf_token" value="')[1].split('"')[0]
    refused = admin_client.post("/admin/ai-answers/calibrate", data={"target_precision": "0.3",
                                                                     "csrf_token": token})
    assert refused.status_code == 302
    assert "must be between" in admin_client.get("/admin/ai-answers").get_data(as_text=True)
    with runtime.session() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(GateCalibration)) == 0
