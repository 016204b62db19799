"""The reviewed-neighbour rule (service.gate.memory): a question close to one a reviewer judged, answered from the same
article, takes that verdict; calibration judges it leave one out."""

from __future__ import annotations

import numpy as np

from service.gate.memory import ANSWER_SCORE, VETO_SCORE, ReviewedQuestion, effective_score, leave_one_out_verdicts


def ask(client, question: str) -> dict:
    response = client.post("/api/tickets", json={"subject": question, "body": question})
    assert response.status_code == 201, response.get_json()
    return client.get(f"/api/tickets/{response.get_json()['ticket']['id']}").get_json()["ticket"]


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_leave_one_out_takes_the_nearest_other_review_of_the_same_article_above_the_threshold():
    reviewed = [
        ReviewedQuestion(1, unit(1, 0, 0), 10, False),
        ReviewedQuestion(2, unit(1, 0.1, 0), 10, True),   # nearest to 1 (same article): 1 takes its verdict
        ReviewedQuestion(3, unit(1, 0.05, 0), 20, False),  # nearer still, but another article: ignored
        ReviewedQuestion(4, unit(0, 1, 0), 10, True),     # same article, far from everyone: no verdict
        ReviewedQuestion(5, None, 10, True),              # never embedded: neither judged nor judging
    ]
    verdicts = leave_one_out_verdicts(reviewed, 0.8)
    assert verdicts == [True, False, None, None, None]
    assert leave_one_out_verdicts(reviewed, 0.999) == [None] * 5  # above every cosine: no verdicts


def test_the_effective_score_is_the_verdict_else_the_confidence():
    assert effective_score(0.42, None) == 0.42
    assert effective_score(0.99, False) == VETO_SCORE < 0.0
    assert effective_score(0.01, True) == ANSWER_SCORE > 1.0


def test_a_question_like_one_reviewed_wrong_is_handed_off_and_says_why(seeded, client):
    first = ask(client, "Can I return an item and get my money back?")
    assert first["status"] == "answered" and "review_match" not in first["gate"]
    assert client.post(f"/api/tickets/{first['id']}/review", json={"answer_correct": False}).status_code == 200
    again = ask(client, "Can I return an item and get my money back, please?")
    assert again["status"] == "needs_agent"
    assert again["gate"]["review_match"]["ticket_id"] == first["id"]
    assert again["gate"]["review_match"]["answer_correct"] is False
    assert f"#{first['id']}" in again["gate"]["reason"] and "wrong" in again["gate"]["reason"]
    # another article's question is not touched by that verdict
    other = ask(client, "the page is blank")
    assert other["status"] == "answered" and "review_match" not in other["gate"]
    assert client.get("/api/gate").get_json()["review_matches_30d"] == {"answered": 0, "handed_off": 1}


def test_a_question_like_one_reviewed_right_is_answered_though_the_confidence_is_low(seeded, client):
    first = ask(client, "How do I change my email address?")
    gate = first["gate"]
    # the precondition: the floor lets it through, the calibrated confidence alone does not
    assert first["status"] == "needs_agent", gate
    assert gate["top_similarity"] >= gate["min_similarity"] and gate["confidence"] < gate["threshold"], gate
    assert client.post(f"/api/tickets/{first['id']}/review", json={"answer_correct": True}).status_code == 200
    again = ask(client, "How can I change my email address?")
    assert again["status"] == "answered", again["gate"]
    assert again["gate"]["review_match"] == {"ticket_id": first["id"], "answer_correct": True,
                                             "similarity": again["gate"]["review_match"]["similarity"]}
    assert again["gate"]["confidence"] < again["gate"]["threshold"]
    assert client.get("/api/gate").get_json()["review_matches_30d"] == {"answered": 1, "handed_off": 0}



def test_a_verdict_is_about_the_text_reviewed_an_edit_retires_it_an_importance_change_does_not(seeded, client):
    first = ask(client, "Can I return an item and get my money back?")
    article_id = next(c["article_id"] for c in first["citations"] if c["rank"] == 1)
    client.post(f"/api/tickets/{first['id']}/review", json={"answer_correct": False})
    assert client.patch(f"/api/articles/{article_id}", json={"importance": 1.5}).status_code == 200
    assert ask(client, "Can I return an item and get my money back, please?")["status"] == "needs_agent"
    article = client.get(f"/api/articles/{article_id}").get_json()["article"]
    edited = client.patch(f"/api/articles/{article_id}",
                          json={"content": article["content"] + "\n\nReturns of any item are refunded in full."})
    assert edited.status_code == 200
    after = ask(client, "Can I return an item and get my money back, please?")
    assert "review_match" not in after["gate"], after["gate"]


def test_the_eval_protocol_applies_the_rule_a_later_question_takes_its_reviewed_neighbours_verdict():
    from service.gate.evaluation import Attempt, calibrated_answers, calibrate_on
    from service.gate.features import Features

    def attempt(i: int, strength: float, correct: bool, vector: np.ndarray, article: str) -> Attempt:
        features = Features(top_similarity=strength, section_similarity=strength, margin=strength / 3,
                            bm25_score=10 * strength, bm25_rank=1, legs_agree=True, word_overlap=strength,
                            question_words=6, above_floor=2, heading_similarity=strength)
        return Attempt(f"q{i}", True, correct, features, article, tuple(float(x) for x in vector))

    rng = np.random.default_rng(0)
    reviewed = [attempt(i, 0.3 + 0.6 * (i % 10) / 10, i % 10 >= 3, unit(*rng.normal(size=8)), f"a{i}")
                for i in range(80)]
    trap = unit(1, 1, 1, 1, 0, 0, 0, 0)  # a strong-looking question a reviewer marked wrong
    reviewed.append(attempt(100, 0.85, False, trap, "a-trap"))
    calibrator, threshold = calibrate_on(reviewed, target=0.8, confidence=0.8, match_similarity=0.8)
    later = [attempt(200, 0.85, False, unit(1, 1, 1, 0.9, 0.05, 0, 0, 0), "a-trap"),  # rephrasing of the trap
             attempt(201, 0.85, True, unit(1, 1, 1, 0.9, 0.05, 0, 0, 0), "a-other")]  # same words, other article
    assert calibrated_answers(later, calibrator, threshold, 0.3) == [True, True]  # without the rule
    assert calibrated_answers(later, calibrator, threshold, 0.3, reviewed, 0.8) == [False, True]


def test_an_erased_customers_reviewed_question_no_longer_decides(seeded, client):
    question = "Can I return an item and get my money back?"
    created = client.post("/api/tickets", json={"subject": question, "body": question, "email": "ann@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    client.post(f"/api/tickets/{ticket_id}/review", json={"answer_correct": False})
    rephrased = "Can I return an item and get my money back, please?"
    assert ask(client, rephrased)["gate"]["review_match"]["ticket_id"] == ticket_id
    erased = client.post("/api/customers/erase", json={"email": "ann@example.com", "confirm": "ann@example.com"})
    assert erased.status_code == 200, erased.get_json()
    assert "review_match" not in ask(client, rephrased)["gate"]
