"""The knowledge loop end to end on the real database, offline: outcomes → importance proposals → applied
through the audited update; an agent's reply → a candidate → approved or merged, searchable at once."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.models import Article, Ticket
from service.knowledge.candidates import propose_candidate
from service.knowledge.importance import draft_outcomes
from service.providers.llm import OpenAIChatModel

from .admin_helpers import csrf_from
from .helpers import assert_error
from .test_help import asked, post_form

GIFT_WRAP = {"title": "Gift wrapping and gift messages", "category": "Orders", "content": (
    "Add gift wrapping to any item at checkout for $4. Choose Gift options on the cart page, tick Wrap this item "
    "and type a gift message of up to 200 characters. The packing slip in a wrapped order shows no prices.")}
GIFT_MESSAGES = {"title": "Gift messages on orders", "category": "Orders", "content": (
    "You can add a free gift message to any order at checkout. Choose Gift options on the cart page and type a "
    "message of up to 200 characters; it is printed on a card in the box. The packing slip shows no prices.")}
WRAP_QUESTIONS = ["How do I get my order gift wrapped?", "Can you wrap my present?",
                  "How much does gift wrapping cost?", "Is gift wrap available for all items?",
                  "Can I add a gift message to a wrapped gift?"]
MESSAGE_QUESTIONS = ["How do I add a gift message to my order?", "Where do I type the gift message?",
                     "Is the gift message free?", "Can I write a message for the recipient?",
                     "Sending an order as a gift"]
# Answered by both articles, the messages one a little ahead: a +0.25 importance (+0.05 score) turns it over.
CLOSE_CALL = "How do gift options work?"

PICKUP_QUESTION = "Can I collect my order in person from your warehouse instead of having it delivered?"
PICKUP_REPLY = (
    "Hi Jane, yes you can! Choose Warehouse pickup as the delivery option at checkout. Pickup orders are ready "
    "after 2 hours at our Leeds warehouse, Unit 4 Riverside Park, open Monday to Friday from 9:00 to 17:00. Bring "
    "the order confirmation email and a photo ID. If anything goes wrong call me on +44 20 7946 0958 or write to "
    "sam.agent@example.com quoting T-{ticket} and order 123456789.")
REFUND_REPEAT = (
    "Once your return reaches our warehouse we inspect it within 2 business days and email you. The refund then "
    "goes back to your original payment method and usually shows up within 5-10 business days depending on your "
    "bank. Shipping fees are not refunded unless the mistake was ours; store credit is available immediately.")


@pytest.fixture
def settings(tmp_path) -> Settings:
    """No rate limits: one test client asks a dozen questions. The floor gate: these close calls between two gift
    articles are what the learning loop is about, and the calibrated gate (issue 34) would hand them off."""
    return Settings(data_dir=tmp_path, auto_seed=False, rate_limit_tickets=None, rate_limit_feedback=None,
                    answer_gate="floor")


def _add(client, fields: dict) -> int:
    response = client.post("/api/articles", json=fields)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["article"]["id"]


def _cited(runtime, ticket_id: int) -> list[int]:
    with runtime.session() as session:
        return session.execute(sa.text("SELECT article_id FROM ticket_citations WHERE ticket_id = :t AND cited"),
                               {"t": ticket_id}).scalars().all()


def _ask_and(anonymous_client, runtime, question: str, outcome: str, expect_cited: int) -> None:
    """A customer asks on the help page, then marks the answer solved or sends it to an agent."""
    ticket_id, key, html = asked(anonymous_client, question)
    assert _cited(runtime, ticket_id) == [expect_cited], question
    if outcome == "solved":
        response = post_form(anonymous_client, f"/help/tickets/{ticket_id}/solved", html, key=key)
    else:
        response = post_form(anonymous_client, f"/help/tickets/{ticket_id}/escalate", html, key=key,
                             email="customer@example.com")
    assert response.status_code == 303


RECORD_OUTCOME = sa.text("""
WITH t AS (
    INSERT INTO tickets (subject, body, status, resolved_at, escalated_at)
    VALUES (:question, :question, 'answered', CASE WHEN :solved THEN now() END, CASE WHEN NOT :solved THEN now() END)
    RETURNING id
)
INSERT INTO ticket_citations (ticket_id, article_id, article_title, rank, cited, recency, importance, score)
SELECT t.id, :article, 'cited', 1, true, 1, 1, 1 FROM t
""")


def _record(runtime, article_id: int, questions: list[str], *, solved: bool) -> None:
    """Answers citing the article, marked solved or escalated (written directly: the e2e test asks for real)."""
    with runtime.session() as session:
        for question in questions:
            session.execute(RECORD_OUTCOME, {"question": question, "solved": solved, "article": article_id})


def _rank(client, query: str, article_id: int) -> tuple[int, float]:
    results = client.post("/api/search", json={"query": query, "limit": 5}).get_json()["results"]
    position = next(i for i, r in enumerate(results, start=1) if r["id"] == article_id)
    return position, results[position - 1]["score"]


def test_outcomes_propose_importance_with_evidence_and_applying_changes_the_ranking_as_previewed(
        seeded, client, anonymous_client, runtime):
    wrap, messages = _add(client, GIFT_WRAP), _add(client, GIFT_MESSAGES)
    assert _rank(client, CLOSE_CALL, wrap)[0] == 2 and _rank(client, CLOSE_CALL, messages)[0] == 1
    # 1. Customers mark the answers citing the wrapping article solved; 2. those citing the messages one escalated.
    for question in WRAP_QUESTIONS:
        _ask_and(anonymous_client, runtime, question, "solved", wrap)
    for question in MESSAGE_QUESTIONS:
        _ask_and(anonymous_client, runtime, question, "escalated", messages)
    assert client.get("/api/importance-proposals").get_json()["proposals"] == []  # nothing until recounted

    # 3. The wrapping article is proposed up and the messages one down, each with its evidence.
    proposals = {p["article_id"]: p for p in client.post("/api/importance-proposals/refresh").get_json()["proposals"]}
    assert set(proposals) == {wrap, messages}
    up, down = proposals[wrap], proposals[messages]
    assert (up["current_importance"], up["proposed_importance"]) == (1.0, 1.25)
    assert (down["current_importance"], down["proposed_importance"]) == (1.0, 0.75)
    assert (up["evidence"]["solved"], up["evidence"]["escalated"], up["evidence"]["outcomes"]) == (5, 0, 5)
    assert (down["evidence"]["solved"], down["evidence"]["escalated"]) == (0, 5)
    assert up["evidence"]["mean_rate"] == 0.5 and up["evidence"]["drafts_unchanged"] == 0
    assert {q["question"] for q in up["evidence"]["questions"]} == set(WRAP_QUESTIONS)
    assert {q["outcome"] for q in down["evidence"]["questions"]} == {"escalated"}
    with runtime.session() as session:  # nothing applied by itself
        assert session.scalars(sa.select(Article.importance).where(Article.id.in_([wrap, messages]))).all() == [1, 1]

    # 4. The preview says the close call turns over; applying makes it so, and the audit log has it.
    preview = client.get(f"/api/importance-proposals/{up['id']}/preview",
                         query_string={"question": CLOSE_CALL}).get_json()["questions"]
    assert (preview[0]["question"], preview[0]["rank_now"], preview[0]["rank_then"]) == (CLOSE_CALL, 2, 1)
    assert all(item["rank_then"] == 1 for item in preview[1:]) and len(preview) == 3  # and two of its own
    applied = client.post(f"/api/importance-proposals/{up['id']}/apply")
    assert applied.status_code == 200 and applied.get_json()["article"]["importance"] == 1.25
    assert applied.get_json()["proposal"]["status"] == "applied"
    rank, score = _rank(client, CLOSE_CALL, wrap)
    assert rank == 1 and score == pytest.approx(preview[0]["score_then"], abs=1e-6)
    changes = client.get(f"/api/articles/{wrap}/importance-changes").get_json()["changes"]
    assert [(c["old_importance"], c["new_importance"], c["reason"], c["proposal_id"], c["why"]) for c in changes] \
        == [(1.0, 1.25, "proposal", up["id"], f"proposal {up['id']}")]
    assert changes[0]["actor"] == "token:tests"
    assert_error(client.post(f"/api/importance-proposals/{up['id']}/apply"), 409, "conflict")
    # Dismissing leaves the importance as it was.
    dismissed = client.post(f"/api/importance-proposals/{down['id']}/dismiss").get_json()["proposal"]
    assert dismissed["status"] == "dismissed" and _rank(client, MESSAGE_QUESTIONS[0], messages)[0] == 1
    assert client.get(f"/api/articles/{messages}/importance-changes").get_json()["changes"] == []


def test_a_proposal_made_before_a_manual_change_is_refused_and_recounting_replaces_it(seeded, client, runtime):
    wrap, messages = _add(client, GIFT_WRAP), _add(client, GIFT_MESSAGES)
    _record(runtime, wrap, WRAP_QUESTIONS, solved=True)
    _record(runtime, messages, MESSAGE_QUESTIONS[:1], solved=False)  # a mean below 100 %
    first = client.post("/api/importance-proposals/refresh").get_json()["proposals"][0]
    assert client.patch(f"/api/articles/{wrap}", json={"importance": 1.5}).status_code == 200
    assert_error(client.post(f"/api/importance-proposals/{first['id']}/apply"), 409, "conflict")
    second = client.post("/api/importance-proposals/refresh").get_json()["proposals"][0]
    assert second["id"] != first["id"] and second["current_importance"] == 1.5
    statuses = {p["id"]: p["status"] for p in client.get("/api/importance-proposals?status=all").get_json()["proposals"]}
    assert statuses == {first["id"]: "superseded", second["id"]: "pending"}
    # The manual change is in the log as the API's (a token), with who.
    change = client.get(f"/api/articles/{wrap}/importance-changes").get_json()["changes"][0]
    assert (change["reason"], change["actor"], change["old_importance"], change["new_importance"]) == \
        ("api", "token:tests", 1.0, 1.5)


def _handed_off(anonymous_client, question: str) -> int:
    """A question the knowledge base does not answer: the customer sends it to an agent."""
    ticket_id, key, html = asked(anonymous_client, question)
    response = post_form(anonymous_client, f"/help/tickets/{ticket_id}/escalate", html, key=key,
                         email="jane@example.com")
    assert response.status_code == 303
    return ticket_id


def test_an_agent_reply_no_article_covers_becomes_a_candidate_that_approval_makes_answerable(
        seeded, client, anonymous_client, runtime):
    # 5. The question is handed off (no article covers it), and the agent solves it with a public reply.
    ticket_id = _handed_off(anonymous_client, PICKUP_QUESTION)
    similar = _handed_off(anonymous_client, "Is it possible to pick up my parcel at the warehouse myself?")
    with runtime.session() as session:
        assert session.get(Ticket, ticket_id).status == "needs_agent"
    note = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Customer sounds annoyed", "internal": True})
    assert note.status_code == 201
    assert client.get("/api/article-candidates").get_json()["candidates"] == []  # not solved yet
    reply = client.post(f"/api/tickets/{ticket_id}/replies",
                        json={"body": PICKUP_REPLY.format(ticket=ticket_id), "status": "solved"})
    assert reply.status_code == 201 and reply.get_json()["state"] == "solved"
    listed = client.get("/api/article-candidates").get_json()["candidates"]
    assert [c["ticket_id"] for c in listed] == [ticket_id]
    with runtime.session() as session:
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=ticket_id, question=PICKUP_QUESTION, reply_bodies=["other"])
    assert candidate.id == listed[0]["id"]  # one candidate per ticket
    assert "annoyed" not in candidate.body  # internal notes never feed a candidate
    assert (candidate.status, candidate.action, candidate.source) == ("pending", "new", "template")
    assert candidate.title == PICKUP_QUESTION
    for secret in ("+44 20 7946 0958", "sam.agent@example.com", f"T-{ticket_id}", "123456789"):
        assert secret not in candidate.body
    assert "[phone]" in candidate.body and "[email]" in candidate.body and "Warehouse pickup" in candidate.body
    assert [item["ticket_id"] for item in candidate.also_asked] == [similar]
    listed = client.get("/api/article-candidates").get_json()["candidates"]
    assert [c["id"] for c in listed] == [candidate.id]

    # 6. Approving (after an edit) publishes it through the usual add: the same question is now answered from it.
    edited = candidate.body.replace("Hi Jane, yes you can! ", "").split(" If anything goes wrong")[0]
    response = client.post(f"/api/article-candidates/{candidate.id}/approve",
                           json={"content": edited, "category": "Shipping"})
    assert response.status_code == 200, response.get_json()
    article = response.get_json()["article"]
    assert article["embedding_status"] == "embedded" and article["content"] == edited
    assert response.get_json()["candidate"]["status"] == "approved"
    answer = client.post("/api/tickets", json={"subject": PICKUP_QUESTION, "body": PICKUP_QUESTION}).get_json()
    assert answer["ticket"]["status"] == "answered"
    assert [c["article_id"] for c in answer["ticket"]["citations"] if c["cited"]] == [article["id"]]
    assert_error(client.post(f"/api/article-candidates/{candidate.id}/reject"), 409, "conflict")
    assert client.get("/api/article-candidates").get_json()["candidates"] == []


def test_a_reply_that_repeats_a_seed_section_proposes_add_to_that_section_and_merging_extends_it(
        seeded, client, anonymous_client, runtime):
    # 7. The reply says what "When will I get my money back?" already says.
    ticket_id = _handed_off(anonymous_client, "My parcel is back with you, when do I see the money?")
    with runtime.session() as session:
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=ticket_id, question="When do I see the money?",
                                      reply_bodies=[REFUND_REPEAT])
    assert candidate.action == "add_to"
    assert candidate.target["label"] == "How to request a refund › When will I get my money back?"
    assert candidate.target["similarity"] >= runtime.settings.candidate_dedup_threshold
    response = client.post(f"/api/article-candidates/{candidate.id}/merge", json={"content": "Store credit is "
                           "instant; a card refund waits for your bank."})
    assert response.status_code == 200, response.get_json()
    content = response.get_json()["article"]["content"]
    section = content.split("## When will I get my money back?")[1].split("## Still need help?")[0]
    assert "Store credit is instant; a card refund waits for your bank." in section
    assert response.get_json()["article"]["embedding_status"] == "embedded"
    assert response.get_json()["candidate"]["status"] == "merged"


def test_with_a_language_model_the_candidate_is_rewritten_at_low_temperature_as_json(
        seeded, runtime, fake_openai, tmp_path):
    fake_openai.state.chat_reply = ('{"title": "Collecting an order from the warehouse", "body": "Choose '
                                    'Warehouse pickup at checkout. Call [phone] or mail me at a@b.example."}')
    chat = OpenAIChatModel(Settings(data_dir=tmp_path, llm_base_url=fake_openai.base_url, llm_max_retries=0,
                                    llm_temperature=0.9))
    with runtime.session() as session:
        ticket = Ticket(subject=PICKUP_QUESTION, body="from jane@example.com: " + PICKUP_QUESTION, status="needs_agent")
        session.add(ticket)
        session.flush()
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=ticket.id, question=PICKUP_QUESTION, chat=chat,
                                      reply_bodies=[PICKUP_REPLY.format(ticket=ticket.id)])
    assert (candidate.source, candidate.title) == ("llm", "Collecting an order from the warehouse")
    assert "a@b.example" not in candidate.body  # scrubbed again after the model
    request = fake_openai.state.requests[-1]["body"]
    assert request["temperature"] <= 0.2 and request["response_format"] == {"type": "json_object"}
    prompt = request["messages"][1]["content"]
    assert "Warehouse pickup" in prompt and "sam.agent@example.com" not in prompt and "jane@" not in prompt


def test_a_failing_language_model_leaves_the_template_and_says_so(seeded, runtime, fake_openai, tmp_path):
    fake_openai.state.chat_reply = "Sure! Here is an article about pickups."  # not JSON
    chat = OpenAIChatModel(Settings(data_dir=tmp_path, llm_base_url=fake_openai.base_url, llm_max_retries=0))
    with runtime.session() as session:
        ticket = Ticket(subject=PICKUP_QUESTION, body=PICKUP_QUESTION, status="needs_agent")
        session.add(ticket)
        session.flush()
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=ticket.id, question=PICKUP_QUESTION, chat=chat,
                                      reply_bodies=["Choose Warehouse pickup at checkout."])
    assert candidate.source == "template" and candidate.body == "Choose Warehouse pickup at checkout."
    assert "not JSON" in candidate.note


def test_rejecting_publishes_nothing_and_unknown_ids_are_404(seeded, client, anonymous_client, runtime):
    ticket_id = _handed_off(anonymous_client, PICKUP_QUESTION)
    with runtime.session() as session:
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=ticket_id, question=PICKUP_QUESTION, reply_bodies=["Yes."])
    before = client.get("/api/stats").get_json()["articles"]
    assert client.post(f"/api/article-candidates/{candidate.id}/reject").get_json()["candidate"]["status"] == \
        "rejected"
    assert client.get("/api/stats").get_json()["articles"] == before
    assert [c["id"] for c in client.get("/api/article-candidates?status=rejected").get_json()["candidates"]] == \
        [candidate.id]
    assert_error(client.post(f"/api/article-candidates/{candidate.id}/merge", json={}), 409, "conflict")
    assert_error(client.post("/api/article-candidates/999999/approve", json={}), 404, "not_found")
    assert_error(client.post("/api/importance-proposals/999999/apply"), 404, "not_found")
    assert_error(client.get("/api/article-candidates?status=maybe"), 400, "validation_error")
    assert_error(client.get("/api/articles/999999/importance-changes"), 404, "not_found")


def test_the_admin_slider_is_audited_as_manual_with_the_admin(seeded, admin_client, runtime):
    article_id = first_article_id(runtime)
    page = admin_client.get(f"/admin/articles/{article_id}").get_data(as_text=True)
    response = admin_client.patch(f"/api/articles/{article_id}", json={"importance": 1.5},
                                  headers={"X-CSRF-Token": csrf_from(page)})
    assert response.status_code == 200
    change = admin_client.get(f"/api/articles/{article_id}/importance-changes").get_json()["changes"][0]
    assert (change["reason"], change["actor"], change["why"]) == ("manual", "admin:lead", "manual")


def first_article_id(runtime) -> int:
    with runtime.session() as session:
        return session.scalar(sa.select(Article.id).order_by(Article.id).limit(1))


def _solved_wrap_questions(client, runtime) -> int:
    """Five solved answers citing the wrapping article and five escalated ones citing the messages one."""
    wrap, messages = _add(client, GIFT_WRAP), _add(client, GIFT_MESSAGES)
    _record(runtime, wrap, WRAP_QUESTIONS, solved=True)
    _record(runtime, messages, MESSAGE_QUESTIONS, solved=False)
    return wrap


def test_the_importance_page_shows_evidence_and_what_if_and_applies_through_the_audited_update(
        seeded, client, admin_client, runtime):
    wrap = _solved_wrap_questions(client, runtime)
    page = admin_client.get("/admin/importance").get_data(as_text=True)
    assert "No pending proposals" in page and 'aria-current="page">Importance</a>' in page  # with the nav
    response = post_form(admin_client, "/admin/importance/refresh", page)
    assert response.status_code == 302
    page = admin_client.get("/admin/importance").get_data(as_text=True)
    assert "Gift wrapping and gift messages</a>:" in page and "1.00 → <strong>1.25</strong>" in page
    assert "5 solved, 0 escalated" in page and WRAP_QUESTIONS[-1] in page and "Rank at 1.25" in page
    proposals = client.get("/api/importance-proposals").get_json()["proposals"]
    # the wrapping article's (the escalated messages article may have one too, in no fixed order)
    proposal_id = next(p["id"] for p in proposals if p["article_id"] == wrap)
    response = post_form(admin_client, f"/admin/importance/{proposal_id}/apply", page)
    assert response.status_code == 302
    page = admin_client.get("/admin/importance").get_data(as_text=True)
    assert "importance 1 → 1.25" in page and "applied" in page
    article_page = admin_client.get(f"/admin/articles/{wrap}").get_data(as_text=True)
    assert f"proposal {proposal_id}" in article_page and "admin:lead" in article_page
    assert "1.00 → 1.25" in article_page


def test_the_candidates_page_approves_an_edited_candidate(seeded, client, anonymous_client, admin_client,
                                                          runtime):
    ticket_id = _handed_off(anonymous_client, PICKUP_QUESTION)
    with runtime.session() as session:
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=ticket_id, question=PICKUP_QUESTION,
                                      reply_bodies=[PICKUP_REPLY.format(ticket=ticket_id)])
    page = admin_client.get("/admin/candidates").get_data(as_text=True)
    assert PICKUP_QUESTION in page and "[phone]" in page and "sam.agent@example.com" not in page
    response = post_form(admin_client, f"/admin/candidates/{candidate.id}/approve", page,
                         title="Collecting an order from the warehouse", content="Choose Warehouse pickup.",
                         category="")
    assert response.status_code == 302
    page = admin_client.get("/admin/candidates").get_data(as_text=True)
    assert "Published “Collecting an order from the warehouse” (embedded)." in page
    found = client.post("/api/search", json={"query": "warehouse pickup", "limit": 1}).get_json()["results"]
    assert found[0]["title"] == "Collecting an order from the warehouse"
    # A second decision on the same candidate is refused with a message, not an error page.
    response = post_form(admin_client, f"/admin/candidates/{candidate.id}/reject", page)
    assert "is approved, not pending" in admin_client.get(response.headers["Location"]).get_data(as_text=True)


def test_a_reimported_file_that_names_a_new_importance_is_audited_as_import(session, local_embedder, tmp_path):
    from service.knowledge.audit import importance_history
    from service.knowledge.importer import import_path

    page = tmp_path / "gift-cards.md"
    page.write_text("---\ntitle: Gift cards\nimportance: 1.0\n---\n\nCheck the balance under Account > Gift cards.")
    import_path(session, local_embedder, tmp_path)
    page.write_text("---\ntitle: Gift cards\nimportance: 1.5\n---\n\nCheck the balance under Account > Gift cards.")
    import_path(session, local_embedder, tmp_path)
    article_id = session.scalar(sa.select(Article.id).where(Article.title == "Gift cards"))
    assert [(c.reason, c.old_importance, c.new_importance) for c in importance_history(session, article_id)] == \
        [("import", 1.0, 1.5)]


def test_agent_replies_count_as_draft_outcomes_of_the_articles_their_drafts_cited(
        seeded, client, anonymous_client, runtime):
    first = _handed_off(anonymous_client, "How do I get my money back for a returned order?")
    second = _handed_off(anonymous_client, "I want a refund for the shoes I sent back")
    drafts = {t: client.post(f"/api/tickets/{t}/draft").get_json() for t in (first, second)}
    cited = {c["article_id"] for d in drafts.values() for c in d["citations"]}
    assert cited, drafts
    assert client.post(f"/api/tickets/{first}/replies", json={"body": drafts[first]["draft"]}).status_code == 201
    rewritten = "We have issued the refund by hand; it reaches your card within a week."
    assert client.post(f"/api/tickets/{second}/replies", json={"body": rewritten}).status_code == 201
    with runtime.session() as session:
        counts = draft_outcomes(session, 30)
    first_cited = {c["article_id"] for c in drafts[first]["citations"]}
    second_cited = {c["article_id"] for c in drafts[second]["citations"]}
    for article_id in cited:
        assert counts[article_id] == (int(article_id in first_cited), int(article_id in second_cited))
