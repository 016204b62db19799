"""The chat widget's HTTP side through the Flask test client on the real database: the loader and frame headers,
streamed answers, visitor tokens (forged / replayed / expired → 401), identity, hand-off, agent replies, limits."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
import sqlalchemy as sa

from service.db.models import Ticket, TicketMessage, WidgetMessage
from service.web.app import create_app
from service.widget.answering import follow_up_query, may_become_refusal, split_into_pieces
from service.widget.identity import IdentityRefused, user_hash, verify_visitor
from service.widget.locales import pick_locale
from service.widget.tokens import issue_token, read_token

from .helpers import assert_error

HOST = "http://127.0.0.1:5999"
SECRET = "identity-secret-for-tests"
PASSWORD_QUESTION = "I forgot my password and the reset email never arrived"
OFF_TOPIC = "What is the capital of France?"


def widget_app(runtime, **settings):
    """The app with widget settings (the host origin allowed)."""
    runtime.settings = replace(runtime.settings, widget_allowed_origins=(HOST,), **settings)
    return create_app({"TESTING": True}, runtime=runtime)


@pytest.fixture
def widget_client(seeded):
    return widget_app(seeded).test_client()


def start(client, identity=None, token=None):
    headers = {"X-Widget-Token": token} if token else {}
    return client.post("/widget/api/session", json={"locale": "en", "identity": identity}, headers=headers)


def events_of(response) -> list[tuple[str, dict]]:
    """The server-sent events of a response, in order."""
    found = []
    for chunk in response.get_data(as_text=True).split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "event" in lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


def ask(client, token, question):
    return client.post("/widget/api/ask", json={"question": question}, headers={"X-Widget-Token": token})


@pytest.mark.parametrize("requested, accept, expected", [
    ("de", None, "de"), ("de-AT", None, "de"), (None, "fr-FR,de;q=0.8", "de"), ("xx", "xx", "en"), (None, None, "en"),
])
def test_the_locale_is_data_locale_then_the_browser_language_then_english(requested, accept, expected):
    assert pick_locale(requested, accept) == expected


@pytest.mark.parametrize("text", ["From our help article “A” [1]:\n\nStep one.  Then two\nthree.", "", "one"])
def test_extractive_pieces_join_back_into_the_answer(text):
    assert "".join(split_into_pieces(text)) == text


@pytest.mark.parametrize("start, held", [("", True), ("CAN", True), ("  cannot_", True), ("CANNOT_ANSWER", True),
                                         ("Open ", False), ("Can you", False), ("**Step", False)])
def test_only_a_start_that_could_become_the_refusal_is_held_back(start, held):
    assert may_become_refusal(start) is held


def test_a_follow_up_is_retrieved_with_the_question_before_it():
    assert follow_up_query("How long does it take?", ["old", "Where is my refund?"]) == \
        "Where is my refund?\n\nHow long does it take?"


def test_tokens_are_refused_when_forged_tampered_or_expired():
    token = issue_token("key", 7, 2)
    assert read_token("key", token, 60).conversation_id == 7
    assert read_token("other key", token, 60) is None
    assert read_token("key", token[:-2] + ("AA" if not token.endswith("AA") else "BB"), 60) is None
    assert read_token("key", token, -1) is None  # older than max_age


def test_identity_needs_the_right_hmac_and_required_mode_refuses_anonymous():
    good = {"user_id": "u-42", "user_hash": user_hash(SECRET, "u-42"), "email": "ana@example.com"}
    assert verify_visitor(good, secret=SECRET, required=True).user_id == "u-42"
    with pytest.raises(IdentityRefused):
        verify_visitor(good | {"user_hash": user_hash("wrong", "u-42")}, secret=SECRET, required=False)
    with pytest.raises(IdentityRefused):
        verify_visitor({"email": "ana@example.com"}, secret=SECRET, required=True)
    assert verify_visitor(None, secret=SECRET, required=False).user_id is None


def test_the_frame_may_be_framed_only_by_the_allowed_origins(widget_client):
    page = widget_client.get("/widget?locale=de&color=%23aa0000")
    assert page.status_code == 200
    csp = page.headers["Content-Security-Policy"]
    assert f"frame-ancestors 'self' {HOST};" in csp
    assert "X-Frame-Options" not in page.headers  # the CSP's list decides (DENY would refuse every site)
    html = page.get_data(as_text=True)
    assert 'lang="de"' in html and "Ihre Frage" in html and 'data-color="#aa0000"' in html
    assert widget_client.get("/help").headers["X-Frame-Options"] == "DENY"  # nothing else became frameable


def test_the_loader_is_a_small_script_with_every_locale_launcher_name(widget_client):
    script = widget_client.get("/widget.js")
    assert script.status_code == 200 and script.mimetype == "application/javascript"
    text = script.get_data(as_text=True)
    assert "Open support chat" in text and "Support-Chat öffnen" in text
    assert '"*"' not in text and "postMessage(message, ORIGIN)" in text  # never to any origin
    assert len(text.encode()) < 15 * 1024


def test_a_question_streams_gate_then_text_then_citations_to_the_help_center(widget_client):
    token = start(widget_client).get_json()["token"]
    response = ask(widget_client, token, PASSWORD_QUESTION)
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    events = events_of(response)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "gate" and events[0][1] == {"answerable": True}  # the decision, never the team's evidence
    assert kinds[-2:] == ["citations", "done"] and kinds.count("delta") > 1
    text = "".join(data["text"] for kind, data in events if kind == "delta")
    assert text.startswith("From our help article “Reset your password”")
    [citation] = events[-2][1]["citations"]
    assert citation["title"] == "Reset your password"
    assert citation["url"].startswith(f"http://localhost/help/articles/{citation['article_id']}#")
    follow_up = events_of(ask(widget_client, token, "and what if it is not in spam either?"))
    assert follow_up[0][0] == "gate" and follow_up[-1][0] == "done"
    history = start(widget_client, token=token).get_json()["messages"]
    assert [m["role"] for m in history] == ["visitor", "assistant", "visitor", "assistant"]
    assert history[1]["body"] == text and history[1]["citations"][0]["url"] == citation["url"]


def test_an_off_topic_question_is_refused_by_the_same_gate_as_tickets(widget_client):
    token = start(widget_client).get_json()["token"]
    events = events_of(ask(widget_client, token, OFF_TOPIC))
    assert events[0][1]["answerable"] is False
    assert events[-2] == ("citations", {"citations": []}) and events[-1][1]["answered"] is False


def test_a_forged_or_replayed_visitor_token_gets_401(widget_client):
    first = start(widget_client).get_json()["token"]
    assert ask(widget_client, first, PASSWORD_QUESTION).status_code == 200
    resumed = start(widget_client, token=first)  # a reload: the same conversation under a new token
    assert resumed.status_code == 200 and resumed.get_json()["messages"]
    second = resumed.get_json()["token"]
    assert_error(ask(widget_client, first, PASSWORD_QUESTION), 401, "unauthorized")  # replayed
    assert_error(start(widget_client, token=first), 401, "unauthorized")
    forged = issue_token("not the app's key", 1, 1)
    assert_error(ask(widget_client, forged, PASSWORD_QUESTION), 401, "unauthorized")
    assert_error(widget_client.get("/widget/api/messages", headers={"X-Widget-Token": forged}), 401, "unauthorized")
    assert ask(widget_client, second, PASSWORD_QUESTION).status_code == 200


def test_identity_required_refuses_anonymous_and_a_wrong_hash_then_a_verified_user_chats(seeded):
    client = widget_app(seeded, widget_identity_secret=SECRET, widget_identity_required=True).test_client()
    assert_error(start(client), 401, "unauthorized")
    assert_error(start(client, {"user_id": "u-1", "user_hash": user_hash("guess", "u-1")}), 401, "unauthorized")
    verified = start(client, {"user_id": "u-1", "user_hash": user_hash(SECRET, "u-1")})
    assert verified.status_code == 200 and verified.get_json()["verified"] is True
    token = verified.get_json()["token"]
    assert ask(client, token, PASSWORD_QUESTION).get_data(as_text=True).endswith("\n\n")
    made = client.post("/widget/api/handoff", json={"email": "u1@example.com"}, headers={"X-Widget-Token": token})
    assert made.status_code == 201
    # The same user on another device continues the same conversation and sees it, and their tickets.
    again = start(client, {"user_id": "u-1", "user_hash": user_hash(SECRET, "u-1")}).get_json()
    assert [m["role"] for m in again["messages"]] == ["visitor", "assistant"]
    assert [t["reference"] for t in again["tickets"]] == [made.get_json()["ticket"]]
    assert assert_error(ask(client, token, PASSWORD_QUESTION), 401, "unauthorized")  # the other device's token


def test_a_wrong_hash_is_refused_even_when_identity_is_optional(seeded):
    client = widget_app(seeded, widget_identity_secret=SECRET).test_client()
    assert_error(start(client, {"user_id": "u-1", "user_hash": "00" * 32}), 401, "unauthorized")
    assert start(client).status_code == 200


def test_talk_to_a_person_makes_an_escalated_ticket_with_the_transcript_and_the_agent_reply_comes_back(
        widget_client, seeded, client):
    token = start(widget_client).get_json()["token"]
    ask(widget_client, token, PASSWORD_QUESTION).get_data()
    assert_error(widget_client.post("/widget/api/handoff", json={}, headers={"X-Widget-Token": token}),
                 400, "validation_error")  # anonymous: an e-mail is needed
    made = widget_client.post("/widget/api/handoff", json={"email": "ana@example.com"},
                              headers={"X-Widget-Token": token})
    assert made.status_code == 201
    ticket_id = int(made.get_json()["ticket"].removeprefix("T-"))
    with seeded.session() as session:
        ticket = session.get(Ticket, ticket_id)
        assert ticket.customer_email == "ana@example.com" and ticket.escalation_reason == "asked_for_person"
        assert ticket.state == "open"
        first = session.scalar(sa.select(TicketMessage.body).where(TicketMessage.ticket_id == ticket_id)
                               .order_by(TicketMessage.id).limit(1))
    assert f"Visitor: {PASSWORD_QUESTION}" in first and "Assistant: From our help article" in first
    assert widget_client.post("/widget/api/handoff", json={}, headers={"X-Widget-Token": token}).get_json() == \
        {"ticket": f"T-{ticket_id}", "created": False}
    listed = client.get("/api/tickets?queue=all").get_json()["tickets"]
    assert ticket_id in [t["id"] for t in listed]

    poll = widget_client.get("/widget/api/messages?after=0", headers={"X-Widget-Token": token})
    assert poll.get_json() == {"messages": []}
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Hi Ana, I have re-sent the e-mail."})
    assert reply.status_code == 201
    [message] = widget_client.get("/widget/api/messages?after=0", headers={"X-Widget-Token": token}).get_json()[
        "messages"]
    assert message["role"] == "agent" and message["body"] == "Hi Ana, I have re-sent the e-mail."
    after = int(message["id"][1:])
    assert widget_client.get(f"/widget/api/messages?after={after}",
                             headers={"X-Widget-Token": token}).get_json() == {"messages": []}


def test_did_this_answer_your_question_is_recorded_on_the_answer(widget_client, seeded, client):
    token = start(widget_client).get_json()["token"]
    done = events_of(ask(widget_client, token, PASSWORD_QUESTION))[-1][1]
    answer = widget_client.post("/widget/api/feedback", json={"message_id": done["message_id"], "helpful": True},
                                headers={"X-Widget-Token": token})
    assert answer.status_code == 200
    with seeded.session() as session:
        assert session.get(WidgetMessage, int(done["message_id"][1:])).helpful is True
    assert client.get("/api/gate").get_json()["label_sources"]["widget_feedback"] == 1  # shown beside the reviews
    other = start(widget_client).get_json()["token"]  # another visitor cannot rate it
    assert_error(widget_client.post("/widget/api/feedback", json={"message_id": done["message_id"],
                                                                 "helpful": False},
                                    headers={"X-Widget-Token": other}), 404, "not_found")


@pytest.mark.parametrize("body", [{"question": ""}, {"question": 5}, {"question": "x" * 2001}, {"other": "x"}])
def test_bad_questions_are_400_in_the_error_shape(widget_client, body):
    token = start(widget_client).get_json()["token"]
    response = widget_client.post("/widget/api/ask", json=body, headers={"X-Widget-Token": token})
    assert_error(response, 400, "validation_error")


def test_questions_are_limited_per_visitor_and_per_address(seeded):
    client = widget_app(seeded, rate_limit_widget=(2, 60)).test_client()
    token = start(client).get_json()["token"]
    for _ in range(2):
        assert ask(client, token, OFF_TOPIC).status_code == 200
    assert_error(ask(client, token, OFF_TOPIC), 429, "rate_limited")
    other = start(client).get_json()["token"]  # a new visitor from the same address: the address is spent
    assert_error(ask(client, other, OFF_TOPIC), 429, "rate_limited")


def test_a_streaming_model_reaches_the_client_before_it_has_finished(seeded, fake_openai):
    fake_openai.state.chat_reply = "Open the reset link in the e-mail and choose a new password [1]."
    fake_openai.state.stream_delay = 0.15
    seeded.settings = replace(seeded.settings, llm_base_url=fake_openai.base_url, llm_model="fake")
    seeded.__dict__.pop("chat", None)
    client = widget_app(seeded).test_client()
    token = start(client).get_json()["token"]
    started = time.perf_counter()
    response = client.post("/widget/api/ask", json={"question": PASSWORD_QUESTION},
                           headers={"X-Widget-Token": token}, buffered=False)
    first_delta_at = None
    text = ""
    for chunk in response.response:
        chunk = chunk.decode() if isinstance(chunk, bytes) else chunk
        if chunk.startswith("event: delta"):
            first_delta_at = first_delta_at or time.perf_counter()
            text += json.loads(chunk.split("data: ", 1)[1])["text"]
    response.close()
    [finished] = fake_openai.state.stream_finished_at
    assert first_delta_at is not None and first_delta_at < finished - 0.5  # 12 words × 0.15 s
    assert text.strip() == fake_openai.state.chat_reply
    [request] = fake_openai.chat_requests()
    assert request["body"]["stream"] is True
    print(f"time to first token: {(first_delta_at - started) * 1000:.0f} ms")


def test_the_admin_page_shows_the_snippet_origins_and_whether_the_secret_is_set_never_its_value(seeded,
                                                                                                  admin_account):
    from .admin_helpers import log_in

    client = widget_app(seeded, widget_identity_secret=SECRET).test_client()
    assert log_in(client).status_code == 302
    page = client.get("/admin/widget")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert '&lt;script src=&#34;http://localhost/widget.js&#34; async data-locale=&#34;en&#34;&gt;&lt;/script&gt;' in html
    assert f"<code>{HOST}</code>" in html and "<strong>set</strong>" in html and SECRET not in html
    assert '<script src="/widget.js" async data-locale="en"></script>' in html  # the live preview
    anonymous = create_app({"TESTING": True}, runtime=seeded).test_client()
    assert anonymous.get("/admin/widget").status_code == 302  # behind the login


@pytest.mark.parametrize("body", [{"identity": False}, {"identity": {"user_id": 5}}, {"identity": {"other": "x"}},
                                  {"locale": 3}, {"locale": "<script>"}, {"token": "x"}])
def test_a_malformed_session_start_is_400_in_the_error_shape(widget_client, body):
    assert_error(widget_client.post("/widget/api/session", json=body), 400, "validation_error")


def test_a_streamed_refusal_hands_off_as_a_ticket_would(seeded, fake_openai):
    fake_openai.state.chat_reply = "CANNOT_ANSWER"
    seeded.settings = replace(seeded.settings, llm_base_url=fake_openai.base_url, llm_model="fake")
    seeded.__dict__.pop("chat", None)
    client = widget_app(seeded).test_client()
    token = start(client).get_json()["token"]
    events = events_of(ask(client, token, PASSWORD_QUESTION))
    assert events[0][1]["answerable"] is True  # the gate let it through; the model then declined
    text = "".join(data["text"] for kind, data in events if kind == "delta")
    assert "CANNOT" not in text and text.startswith("We could not find an answer")
    assert events[-2] == ("citations", {"citations": []}) and events[-1][1]["answered"] is False


@pytest.mark.parametrize("raw, origins", [
    ("https://shop.example.com", ("https://shop.example.com",)),
    ("http://127.0.0.1:8001/, https://a.example.com  http://[::1]:9000", (
        "http://127.0.0.1:8001", "https://a.example.com", "http://[::1]:9000")),
])
def test_allowed_origins_are_read_as_a_list_of_origins(raw, origins):
    from service.config import Settings

    assert Settings.from_env({"WIDGET_ALLOWED_ORIGINS": raw}).widget_allowed_origins == origins


@pytest.mark.parametrize("raw", ["*", "shop.example.com", "https://shop.example.com/help", "javascript:alert(1)"])
def test_an_allowed_origin_that_is_not_an_origin_stops_the_start(raw):
    from service.config import ConfigError, Settings

    with pytest.raises(ConfigError, match="WIDGET_ALLOWED_ORIGINS"):
        Settings.from_env({"WIDGET_ALLOWED_ORIGINS": raw})


def test_the_panel_takes_the_brands_name_and_colour_unless_the_tag_sets_its_own(seeded):
    branded = widget_app(seeded, brand_name="Tallybook", brand_color="#0a7f5a").test_client()
    page = branded.get("/widget").get_data(as_text=True)
    assert '<h1 id="panel-title">Tallybook</h1>' in page and 'data-color="#0a7f5a"' in page
    own = branded.get("/widget?title=Shop%20help&color=%23123456").get_data(as_text=True)
    assert '<h1 id="panel-title">Shop help</h1>' in own and 'data-color="#123456"' in own
