"""The agents' team work (issue 25 items 4-6) through the HTTP API and pages: notifications through the outbox,
unread markers, presence, display names, the one ticket list (queues, search, filters, tags, bulk, history),
and CSAT ratings with their report."""

from __future__ import annotations

import dataclasses
import re
import time
from email.message import EmailMessage

import pytest
import sqlalchemy as sa

from service.accounts import create_admin
from service.db.models import MailOutbox, TicketPresence
from service.intake.signature import sign

from .admin_helpers import api_session, csrf_from
from .helpers import assert_error

SECRET = "inbound-test-secret"
PASSWORD = "agent-password-1"


@pytest.fixture
def team(seeded):
    """Mail on (SMTP host set: the outbox queues; nothing is sent here), and two agents with display names."""
    seeded.settings = dataclasses.replace(
        seeded.settings, smtp_host="127.0.0.1", mail_from="Support <support@example.com>",
        mail_reply_to="support+{token}@example.com", inbound_email_secret=SECRET,
        public_url="https://help.example.com")
    with seeded.session() as session:
        create_admin(session, "agnes", PASSWORD, role="agent", email="agnes@team.test", display_name="Agnes")
        create_admin(session, "bert", PASSWORD, role="agent", email="bert@team.test", display_name="Bert B.")
    return seeded


def _agent(app, name: str):
    return api_session(app.test_client(), name, PASSWORD)


@pytest.fixture
def agnes(app, team):
    return _agent(app, "agnes")


@pytest.fixture
def bert(app, team):
    return _agent(app, "bert")


def _escalated(client, subject="Parrot food", body="Do you ship parrot food to Mars?", email="alice@example.com"):
    created = client.post("/api/tickets", json={"subject": subject, "body": body, "email": email})
    assert created.status_code == 201, created.get_data(as_text=True)
    return created.get_json()["ticket"]["id"], created.get_json()["secret"]


def _outbox(session, to: str) -> list[MailOutbox]:
    session.expire_all()
    return list(session.scalars(sa.select(MailOutbox).where(MailOutbox.to_address == to).order_by(MailOutbox.id)))


def _follow_up_on_page(anonymous_client, ticket_id: int, key: str, body: str):
    page = anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True)
    return anonymous_client.post(f"/help/tickets/{ticket_id}/reply",
                                 data={"csrf_token": csrf_from(page.get_data(as_text=True)), "key": key, "body": body})


def _email_reply(client, reply: MailOutbox, body: str):
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "Alice <alice@example.com>", reply.reply_to, "Re: parrots"
    message["Message-ID"], message["In-Reply-To"] = "<alice-2@customer.test>", reply.message_id
    message.set_content(body)
    raw = bytes(message)
    return client.post("/api/inbound/email", data=raw,
                       headers={"X-Signature": sign(SECRET, raw, int(time.time())), "Content-Type": "message/rfc822"})


def test_an_escalated_unassigned_ticket_notifies_every_agent_who_wants_it(team, client, session, bert):
    bert.post("/admin/settings", data={"display_name": "Bert B.", "email": "bert@team.test",
                                       "csrf_token": bert.environ_base["HTTP_X_CSRF_TOKEN"]})  # switch unticked: off
    ticket_id, _ = _escalated(client)
    [note] = _outbox(session, "agnes@team.test")
    assert note.ticket_id is None and note.reply_to is None  # an agent's answer can never pose as the customer
    assert f"[T-{ticket_id}] Needs an agent" in note.subject and f"/admin/inbox/{ticket_id}" in note.body
    assert _outbox(session, "bert@team.test") == []


def test_a_team_address_replaces_the_per_agent_escalation_notices(team, client, session):
    team.settings = dataclasses.replace(team.settings, notify_team_address="support-team@team.test")
    _escalated(client)
    assert len(_outbox(session, "support-team@team.test")) == 1 and _outbox(session, "agnes@team.test") == []


def test_customer_replies_on_the_page_and_by_email_notify_the_assignee_and_mark_the_ticket_unread(
        team, client, anonymous_client, agnes, session):
    ticket_id, key = _escalated(client)
    assert agnes.post(f"/api/tickets/{ticket_id}/assign").status_code == 200
    agnes.get(f"/admin/inbox/{ticket_id}")  # she has read it
    sent = agnes.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"}).get_json()
    assert [t["unread"] for t in agnes.get("/api/tickets?queue=mine").get_json()["tickets"]] == [False]
    before = len(_outbox(session, "agnes@team.test"))
    assert _follow_up_on_page(anonymous_client, ticket_id, key, "Mars, the red one.").status_code == 303
    web_note = _outbox(session, "agnes@team.test")[before]
    assert "Customer replied" in web_note.subject and "Mars, the red one." in web_note.body
    [mine] = agnes.get("/api/tickets?queue=mine").get_json()["tickets"]
    assert mine["id"] == ticket_id and mine["unread"] is True
    assert re.search(r'id="unread-count"[^>]*>1<', agnes.get("/admin/articles").get_data(as_text=True))
    agnes.get(f"/admin/inbox/{ticket_id}")
    assert agnes.get("/api/tickets?queue=mine").get_json()["tickets"][0]["unread"] is False
    reply_row = session.scalar(sa.select(MailOutbox).where(MailOutbox.message_id ==
                                                           sent["message"]["email_message_id"]))
    assert _email_reply(client, reply_row, "Still nothing arrived.").get_json()["outcome"]["action"] == "follow_up"
    assert "Still nothing arrived." in _outbox(session, "agnes@team.test")[-1].body
    assert agnes.get("/api/tickets?queue=mine").get_json()["tickets"][0]["unread"] is True


def test_an_agent_who_switched_notifications_off_gets_none(team, client, anonymous_client, agnes, session):
    ticket_id, key = _escalated(client)
    agnes.post(f"/api/tickets/{ticket_id}/assign")
    page = agnes.get("/admin/settings").get_data(as_text=True)
    assert 'name="notify_by_email" value="1" checked' in page
    assert agnes.post("/admin/settings", data={"display_name": "Agnes", "email": "agnes@team.test",
                                               "csrf_token": csrf_from(page)}).status_code == 302
    before = len(_outbox(session, "agnes@team.test"))
    _follow_up_on_page(anonymous_client, ticket_id, key, "Hello again")
    assert len(_outbox(session, "agnes@team.test")) == before


def test_customers_see_the_display_name_never_the_login_in_the_page_and_the_email(team, client, anonymous_client,
                                                                                 agnes, session):
    ticket_id, key = _escalated(client)
    agnes.post(f"/api/tickets/{ticket_id}/replies", json={"body": "We ship to Earth only."})
    page = anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True).get_data(as_text=True)
    assert "Agnes" in page and "agnes" not in page
    [reply] = [row for row in _outbox(session, "alice@example.com") if "Earth only" in row.body]
    assert reply.from_name == "Agnes"


def test_two_agents_on_one_ticket_see_each_other_until_the_heartbeat_expires(team, client, agnes, bert, session):
    ticket_id, _ = _escalated(client)
    agnes.get(f"/admin/inbox/{ticket_id}")  # opening the workspace is a heartbeat
    seen = bert.put(f"/api/tickets/{ticket_id}/presence", json={"activity": "replying"}).get_json()
    assert seen["viewers"] == [{"username": "agnes", "name": "Agnes", "activity": "viewing"}]
    assert agnes.get(f"/api/tickets/{ticket_id}/presence").get_json()["viewers"] == [
        {"username": "bert", "name": "Bert B.", "activity": "replying"}]
    assert "Bert B. is replying" in agnes.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    session.execute(sa.update(TicketPresence).values(expires_at=sa.func.now() - sa.text("'1 second'::interval")))
    session.commit()
    assert agnes.get(f"/api/tickets/{ticket_id}/presence").get_json()["viewers"] == []
    assert_error(bert.put(f"/api/tickets/{ticket_id}/presence", json={"activity": "dancing"}), 400,
                 "validation_error")
    assert_error(client.put(f"/api/tickets/{ticket_id}/presence", json={"activity": "viewing"}), 403,
                 "forbidden")  # a token is nobody


def test_presence_reports_the_newest_public_message_so_sending_can_warn(team, client, anonymous_client, agnes):
    ticket_id, key = _escalated(client)
    loaded = agnes.get(f"/api/tickets/{ticket_id}/presence").get_json()["latest_public_message_id"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "internal only", "internal": True})
    assert agnes.get(f"/api/tickets/{ticket_id}/presence").get_json()["latest_public_message_id"] == loaded
    _follow_up_on_page(anonymous_client, ticket_id, key, "Are you there?")
    assert agnes.get(f"/api/tickets/{ticket_id}/presence").get_json()["latest_public_message_id"] > loaded


def test_search_finds_words_in_the_subject_and_anywhere_in_the_thread_with_stemming(team, client):
    parrot, _ = _escalated(client, subject="Parrot food", body="Do you ship parrot food to Mars?")
    invoice, _ = _escalated(client, subject="Invoice", body="My invoice shows the wrong VAT number.")
    client.post(f"/api/tickets/{invoice}/replies", json={"body": "Escalated to accounting", "internal": True})

    def found(q: str) -> list[int]:
        return [t["id"] for t in client.get("/api/tickets", query_string={"q": q}).get_json()["tickets"]]

    assert found("parrots") == [parrot] and found("accounting") == [invoice] and found("invoices VAT") == [invoice]
    assert found('"wrong VAT"') == [invoice] and found("mars -parrot") == [] and found("zebra") == []


def test_queues_mine_includes_pending_and_solved_and_all_list_the_rest(team, client, agnes):
    first, _ = _escalated(client)
    second, _ = _escalated(client)
    answered = client.post("/api/tickets", json={"subject": "Password", "body": "How do I reset my password?"})
    answered_id = answered.get_json()["ticket"]["id"]
    agnes.post(f"/api/tickets/{first}/assign")
    agnes.post(f"/api/tickets/{first}/replies", json={"body": "Which planet?"})  # pending
    agnes.post(f"/api/tickets/{second}/replies", json={"body": "Done.", "status": "solved"})

    def queue(name: str) -> list[int]:
        return [t["id"] for t in agnes.get(f"/api/tickets?queue={name}").get_json()["tickets"]]

    assert queue("mine") == [first] and queue("pending") == [first] and queue("solved") == [second]
    assert {first, second, answered_id} <= set(queue("all")) and answered_id not in queue("open")
    assert [t["id"] for t in agnes.get("/api/tickets?queue=all&state=none").get_json()["tickets"]] == [answered_id]
    assert_error(agnes.get("/api/tickets?queue=everything"), 400, "validation_error")
    assert_error(agnes.get("/api/tickets?since=2026-13-01"), 400, "validation_error")
    assert_error(agnes.get("/api/tickets?article_id=%C2%B2"), 400, "validation_error")  # "²": the one parser
    assert queue("all") == [t["id"] for t in agnes.get("/api/tickets?until=2999-01-01").get_json()["tickets"]]
    assert agnes.get("/api/tickets?since=2999-01-01").get_json()["tickets"] == []


def test_tags_replace_the_set_filter_the_list_and_refuse_bad_tags(team, client, agnes):
    tagged, _ = _escalated(client)
    other, _ = _escalated(client)
    response = agnes.post(f"/api/tickets/{tagged}/tags", json={"tags": ["VIP", "billing", "vip"]})
    assert response.status_code == 200 and response.get_json()["tags"] == ["billing", "vip"]
    assert agnes.post(f"/api/tickets/{tagged}/tags", json={"tags": ["billing"]}).get_json()["tags"] == ["billing"]
    assert [t["id"] for t in agnes.get("/api/tickets?tag=billing").get_json()["tickets"]] == [tagged]
    assert agnes.get("/api/tickets?tag=vip").get_json()["tickets"] == []
    assert agnes.get("/api/tickets?queue=all&tag=billing").get_json()["tickets"][0]["tags"] == ["billing"]
    assert_error(agnes.post(f"/api/tickets/{other}/tags", json={"tags": ["no spaces please"]}), 400,
                 "validation_error")
    assert_error(agnes.post(f"/api/tickets/{other}/tags", json={"tags": "billing"}), 400, "validation_error")
    assert_error(agnes.post("/api/tickets/999999/tags", json={"tags": []}), 404, "not_found")
    page = agnes.get(f"/admin/inbox/{tagged}").get_data(as_text=True)
    assert 'name="tags" value="billing"' in page


def test_bulk_assign_and_solve_and_the_customer_history(team, client, agnes, bert):
    first, _ = _escalated(client, email="carol@example.com")
    second, _ = _escalated(client, email="carol@example.com")
    third, _ = _escalated(client, email="dave@example.com")
    assert agnes.post("/api/tickets/bulk", json={"ids": [first, second], "action": "assign"}).get_json() == {
        "changed": [first, second]}
    assert {t["id"] for t in agnes.get("/api/tickets?queue=mine").get_json()["tickets"]} == {first, second}
    assert bert.post("/api/tickets/bulk", json={"ids": [third], "action": "assign",
                                                "assignee": "agnes"}).get_json()["changed"] == [third]
    assert agnes.post("/api/tickets/bulk", json={"ids": [first, third], "action": "solve"}).get_json()[
        "changed"] == [first, third]
    assert [t["id"] for t in agnes.get("/api/tickets?queue=mine").get_json()["tickets"]] == [second]
    assert_error(agnes.post("/api/tickets/bulk", json={"ids": [], "action": "solve"}), 400, "validation_error")
    assert_error(agnes.post("/api/tickets/bulk", json={"ids": [first], "action": "delete"}), 400,
                 "validation_error")
    history = agnes.get(f"/api/tickets/{second}/history").get_json()["tickets"]
    assert [h["id"] for h in history] == [first]
    assert f"T-{first} " in agnes.get(f"/admin/inbox/{second}").get_data(as_text=True)


def test_a_rating_needs_the_solve_and_the_secret_and_a_second_one_replaces_the_first(team, client, anonymous_client,
                                                                                      agnes):
    ticket_id, key = _escalated(client)
    rate = {"rating": "good", "comment": "Quick and kind"}
    assert_error(anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json=rate,
                                       headers={"X-Ticket-Secret": key}), 409, "conflict")
    agnes.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Sent today.", "status": "solved"})
    assert_error(anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json=rate,
                                       headers={"X-Ticket-Secret": "wrong"}), 404, "not_found")
    assert_error(anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json={"rating": "meh"},
                                       headers={"X-Ticket-Secret": key}), 400, "validation_error")
    first = anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json=rate, headers={"X-Ticket-Secret": key})
    assert first.status_code == 200 and first.get_json()["rating"]["rating"] == "good"
    anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json={"rating": "bad"},
                          headers={"X-Ticket-Secret": key})
    csat = client.get("/api/reports/csat").get_json()
    assert csat["by_agent"] == [{"label": "Agnes (agnes)", "good": 0, "bad": 1, "score": 0.0}]
    assert csat["by_solver"][1] == {"label": "Solved by an agent", "good": 0, "bad": 1, "score": 0.0}
    page = anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True).get_data(as_text=True)
    assert "How did we do?" in page and "you rated this bad" in page


def test_the_solve_email_links_to_a_rating_page_that_the_reply_token_unlocks(team, client, anonymous_client, agnes,
                                                                            session):
    ticket_id, _ = _escalated(client)
    agnes.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Sent today.", "status": "solved"})
    [solve] = [row for row in _outbox(session, "alice@example.com") if "Sent today." in row.body]
    link = re.search(r"https://help\.example\.com(/help/tickets/\d+/rate\?token=[\w-]+)", solve.body).group(1)
    page = anonymous_client.get(link)
    assert page.status_code == 200 and "How did we do?" in page.get_data(as_text=True)
    token = link.rpartition("=")[2]
    form = {"csrf_token": csrf_from(page.get_data(as_text=True)), "rating": "good", "comment": "Great"}
    assert anonymous_client.post(f"/help/tickets/{ticket_id}/rate", data={**form, "token": "x" * 24}).status_code == 404
    done = anonymous_client.post(f"/help/tickets/{ticket_id}/rate", data={**form, "token": token})
    assert done.status_code == 200 and "Thank you" in done.get_data(as_text=True)
    assert client.get("/api/reports/csat").get_json()["by_agent"][0]["good"] == 1


def test_an_ai_answer_the_customer_marked_solved_counts_as_ai_only(team, client, anonymous_client, admin_client):
    created = client.post("/api/tickets", json={"subject": "Password", "body": "How do I reset my password?"})
    ticket_id, key = created.get_json()["ticket"]["id"], created.get_json()["secret"]
    page = anonymous_client.get(f"/help/tickets/{ticket_id}?key={key}", follow_redirects=True).get_data(as_text=True)
    anonymous_client.post(f"/help/tickets/{ticket_id}/solved", data={"csrf_token": csrf_from(page), "key": key})
    anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json={"rating": "good"},
                          headers={"X-Ticket-Secret": key})
    assert client.get("/api/reports/csat").get_json()["by_solver"][0] == {
        "label": "AI only", "good": 1, "bad": 0, "score": 1.0}
    dashboard = admin_client.get("/admin/dashboard").get_data(as_text=True)
    assert 'id="csat"' in dashboard and "AI only" in dashboard and "100%" in dashboard


def test_the_old_tickets_list_is_the_one_list_with_every_queue_and_the_ai_status_filter(team, client, agnes):
    escalated, _ = _escalated(client, subject="Parrot food")
    client.post("/api/tickets", json={"subject": "Password reset", "body": "How do I reset my password?"})
    page = agnes.get("/admin/tickets?status=needs_agent").get_data(as_text=True)
    assert f"T-{escalated} Parrot food" in page and "Password reset" not in page
    for label in ("Mine", "Unassigned", "Open", "Pending", "Solved", "All"):
        assert f">{label} <span class=\"count\">" in page
    assert "Password reset" in agnes.get("/admin/tickets").get_data(as_text=True)  # all tickets, as it used to
    assert "Password reset" not in agnes.get("/admin/inbox").get_data(as_text=True)  # unassigned work only


def test_admins_edit_anyone_and_agents_only_themselves(team, agnes, admin_client):
    assert agnes.get("/admin/settings?username=bert").status_code == 403
    page = admin_client.get("/admin/settings?username=agnes").get_data(as_text=True)
    response = admin_client.post("/admin/settings", data={"username": "agnes", "display_name": "Agnes K.",
                                                          "email": "not-an-address", "notify_by_email": "1",
                                                          "csrf_token": csrf_from(page)})
    assert response.status_code == 400 and "e-mail address" in response.get_data(as_text=True)
    admin_client.post("/admin/settings", data={"username": "agnes", "display_name": "Agnes K.",
                                               "email": "agnes@team.test", "notify_by_email": "1",
                                               "csrf_token": csrf_from(page)})
    assert "Agnes K." in admin_client.get("/admin/agents").get_data(as_text=True)


def test_the_cli_creates_and_edits_an_agents_display_name_email_and_switch(cli_env):
    from click.testing import CliRunner

    from service.cli.main import main

    runner = CliRunner()
    created = runner.invoke(main, ["admin", "create", "--username", "agnes", "--password", PASSWORD, "--role",
                                   "agent", "--email", "agnes@team.test", "--display-name", "Agnes"])
    assert created.exit_code == 0, created.output
    assert "Agnes  agnes@team.test  notifications on" in runner.invoke(main, ["admin", "list"]).output
    edited = runner.invoke(main, ["admin", "edit", "--username", "agnes", "--display-name", "Agnes K.",
                                  "--no-notify"])
    assert edited.exit_code == 0 and "notifications off" in edited.output
    assert "Agnes K.  agnes@team.test  notifications off" in runner.invoke(main, ["admin", "list"]).output
    bad = runner.invoke(main, ["admin", "edit", "--username", "agnes", "--email", "not an address"])
    assert bad.exit_code == 1 and "email" in bad.output


@pytest.mark.parametrize("raw, expected", [
    (["VIP", " billing ", "vip"], ["vip", "billing"]),
    ([], []),
    (["a-b_c", "9lives"], ["a-b_c", "9lives"]),
])
def test_tags_are_trimmed_lower_cased_and_deduplicated(raw, expected):
    from service.tickets.tags import clean_tags

    assert clean_tags(raw) == expected


@pytest.mark.parametrize("raw", [["two words"], ["-leading"], ["x" * 41], [7], "vip", ["ok"] * 21, ["é"]])
def test_tags_outside_the_pattern_are_refused(raw):
    from service.tickets.tags import clean_tags
    from service.validation import ValidationError

    with pytest.raises(ValidationError):
        clean_tags(raw)


@pytest.mark.parametrize("raw, ok", [([1, 2.0], [1, 2]), ([True], None), ([0], None), ([1.5], None), ([], None),
                                     ("1", None), (list(range(1, 102)), None)])
def test_bulk_ticket_ids_are_positive_whole_numbers(raw, ok):
    from service.tickets.desk import clean_ticket_ids
    from service.validation import ValidationError

    if ok is None:
        with pytest.raises(ValidationError):
            clean_ticket_ids(raw)
    else:
        assert clean_ticket_ids(raw) == ok


@pytest.mark.parametrize("raw", ["2026-02-30", "2026-1-05", "20260105", "yesterday", "2026-01-05T00:00"])
def test_list_dates_must_be_real_days(raw):
    from service.tickets.desk import parse_day
    from service.validation import ValidationError

    with pytest.raises(ValidationError):
        parse_day("since", raw)
