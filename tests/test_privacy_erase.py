"""Customer erasure (issue 36): after `erase`, no column of any table holds the customer's address, the words of
their messages or their attachments' bytes, while another customer's rows stay byte-for-byte the same."""

from __future__ import annotations

import dataclasses
import io
import json
import threading
import time
import zipfile

import pytest
import sqlalchemy as sa

from service.intake.receive import receive_email
from service.intake.signature import sign
from service.tickets.deflection import deflection_report

from .admin_helpers import csrf_from
from .helpers import assert_error
from .test_mail_inbound import email_bytes

SECRET = "privacy-test-secret"
# Per customer: address, words only they wrote (or were written to them), attachment bytes.
ANN = ("ann.quixotrel@example.com", ["brambleweft", "zephyrcorn", "marzipantic", "snorkelwhim", "tundrafig",
                                     "velvetrook", "glintmoss"], b"\x89ANN-ATTACHMENT\x00\xfe\x01quixotrel-bytes")
BEA = ("bea.lumberwisp@example.com", ["glimmerfox", "cobaltmint", "wafflegrove", "pondquill", "rivetbloom",
                                      "sagecrumb", "dovetailor"], b"\x89BEA-ATTACHMENT\x00\xfe\x02lumberwisp-bytes")
# Every type a scan can read as text: bytea shows as hex, tsvector as its lexemes, arrays and JSON as text.
SCANNED_TYPES = ("text", "character varying", "bytea", "jsonb", "json", "ARRAY", "tsvector")
COLUMNS_SQL = sa.text("""
SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' AND c.data_type = ANY(:types)
ORDER BY 1, 2
""")


@pytest.fixture
def inbound(runtime):
    """The webhook on, replies plus-addressed, an SMTP server named but never reached (no worker runs)."""
    runtime.settings = dataclasses.replace(
        runtime.settings, smtp_host="127.0.0.1", smtp_port=9, mail_from="Support <support@example.com>",
        mail_reply_to="support+{token}@example.com", inbound_email_secret=SECRET,
        notify_team_address="team@example.com")  # agents' notifications quote the customer too
    return runtime


def scan(session, needles: list[str], blobs: list[bytes]) -> list[tuple[str, str, str]]:
    """Every (table, column, needle) where a needle (case-insensitive; a word's first 7 letters, which survive
    stemming in tsvectors) or a blob (its bytes, or its hex) is found, over every table of the schema."""
    found = []
    columns = session.execute(COLUMNS_SQL, {"types": list(SCANNED_TYPES)}).all()
    assert {"tickets", "ticket_attachments", "inbound_emails"} <= {table for table, _, _ in columns}
    texts = [needle.lower()[:7] if "@" not in needle else needle.lower() for needle in needles]
    texts += [blob.hex() for blob in blobs]
    for table, column, data_type in columns:
        for text in texts:
            sql = f'SELECT count(*) FROM "{table}" WHERE position(:text in lower("{column}"::text)) > 0'
            if session.execute(sa.text(sql), {"text": text}).scalar_one():
                found.append((table, column, text))
        if data_type == "bytea":
            for blob in blobs:
                sql = f'SELECT count(*) FROM "{table}" WHERE position(:blob in "{column}") > 0'
                if session.execute(sa.text(sql), {"blob": blob}).scalar_one():
                    found.append((table, column, blob.hex()))
    return found


def make_customer(client, anonymous_client, runtime, customer) -> None:
    """Tickets by API, webhook (with an attachment), pipe and IMAP (the same intake), and the help page; an agent's
    replies, a solve with its candidate, a rating, feedback, and an outbound e-mail that failed."""
    email, words, blob = customer
    created = client.post("/api/tickets", json={"subject": f"Order {words[0]}", "email": email,
                                                "body": f"My {words[1]} arrived broken, please help."})
    assert created.status_code == 201, created.get_data(as_text=True)
    ticket_id, secret = created.get_json()["ticket"]["id"], created.get_json()["secret"]
    local = email.split("@")[0]
    raw = email_bytes(sender=f"Customer <{email}>", subject=f"Re: Order {words[0]} [T-{ticket_id}]",
                      message_id=f"<{local}-1@customer.test>", body=f"Photo of the {words[2]} attached.",
                      attachments=[("photo.bin", "application/octet-stream", blob)])
    signature = sign(SECRET, raw, int(time.time()))
    hook = anonymous_client.post("/api/inbound/email", data=raw,
                                 headers={"X-Signature": signature, "Content-Type": "message/rfc822"})
    assert hook.status_code == 200 and hook.get_json()["outcome"]["action"] == "follow_up", hook.get_data()
    new_by_hook = email_bytes(sender=email, subject=f"New {words[3]} question", message_id=f"<{local}-2@c.test>",
                              body=f"Is the {words[3]} waterproof?")
    hooked = anonymous_client.post("/api/inbound/email", data=new_by_hook, headers={
        "X-Signature": sign(SECRET, new_by_hook, int(time.time())), "Content-Type": "message/rfc822"})
    assert hooked.get_json()["outcome"]["action"] == "new_ticket"
    for n, channel in ((3, "pipe"), (4, "imap")):  # `mail pipe` and the IMAP poller hand raw bytes to this call
        outcome = receive_email(runtime, email_bytes(sender=email, subject=f"{channel} {words[4]}",
                                                     message_id=f"<{local}-{n}@c.test>",
                                                     body=f"Sent by {channel}: {words[4]} again."),
                                ticket_link=lambda i, s: f"/help/tickets/{i}")
        assert outcome.action == "new_ticket", outcome
    page = anonymous_client.get("/help")
    asked = anonymous_client.post("/help/ask", data={"csrf_token": csrf_from(page.get_data(as_text=True)),
                                                     "description": f"Where is my {words[5]}?", "email": email,
                                                     "person": "1"})
    assert asked.status_code == 303, asked.get_data(as_text=True)
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": f"We are sending a new {words[6]} today."})
    solved = client.post(f"/api/tickets/{ticket_id}/replies",
                         json={"body": f"The new {words[6]} has shipped.", "status": "solved"})
    assert solved.status_code in (200, 201), solved.get_data(as_text=True)
    rated = anonymous_client.post(f"/api/tickets/{ticket_id}/rating", json={"rating": "good", "comment": words[1]},
                                  headers={"X-Ticket-Secret": secret})
    assert rated.status_code == 200, rated.get_data(as_text=True)
    anonymous_client.post(f"/api/tickets/{ticket_id}/feedback", json={"helpful": False, "comment": words[2]},
                          headers={"X-Ticket-Secret": secret})
    with runtime.session() as session:
        failed = session.execute(sa.text(
            "UPDATE mail_outbox SET failed_at = now(), attempts = 3, last_error = :error "
            "WHERE ticket_id = :t AND position(:email in to_address) > 0"),
            {"error": f"550 no such user <{email}>", "t": ticket_id, "email": email}).rowcount
        session.commit()
    assert failed >= 1


def customer_rows(session, email: str) -> list:
    """Everything of the customer's tickets, as the database holds it (bytes as hex)."""
    return session.execute(sa.text("""
        SELECT to_jsonb(t), (SELECT jsonb_agg(to_jsonb(m) ORDER BY m.id) FROM ticket_messages m WHERE m.ticket_id = t.id),
               (SELECT jsonb_agg(jsonb_build_object('f', a.filename, 'c', encode(a.content, 'hex')) ORDER BY a.id)
                FROM ticket_attachments a JOIN ticket_messages m ON m.id = a.message_id WHERE m.ticket_id = t.id),
               (SELECT to_jsonb(r) FROM ticket_ratings r WHERE r.ticket_id = t.id),
               (SELECT jsonb_agg(encode(i.raw, 'hex') ORDER BY i.id) FROM inbound_emails i WHERE i.ticket_id = t.id)
        FROM tickets t WHERE customer_email = :email ORDER BY t.id"""), {"email": email}).all()


def test_erasing_one_customer_leaves_no_trace_of_them_anywhere_and_the_other_unchanged(
        inbound, client, anonymous_client, runtime, session):
    make_customer(client, anonymous_client, runtime, ANN)
    make_customer(client, anonymous_client, runtime, BEA)
    session.expire_all()
    ann_needles, bea_needles = [ANN[0], *ANN[1]], [BEA[0], *BEA[1]]
    assert {hit[2] for hit in scan(session, ann_needles, [ANN[2]])} >= {ANN[0], ANN[2].hex(), "brambl"[:6] + "e"}
    candidates = session.execute(sa.text("SELECT count(*) FROM article_candidates c JOIN tickets t "
                                         "ON t.id = c.ticket_id WHERE t.customer_email = :e"), {"e": ANN[0]}).scalar()
    assert candidates == 1
    team_mail = sa.text("SELECT count(*) FROM mail_outbox WHERE to_address = 'team@example.com'")
    assert session.execute(team_mail).scalar_one() >= 2  # a notification for each customer, quoting them
    bea_before = customer_rows(session, BEA[0])
    counts_before = deflection_report(session, days=7).total
    assert len(bea_before) == 5

    dry = client.post("/api/customers/erase", json={"email": ANN[0].upper(), "confirm": ANN[0], "dry_run": True})
    assert dry.status_code == 200 and dry.get_json()["counts"]["tickets"] == 5
    assert scan(session, ann_needles, [ANN[2]])  # a dry run erases nothing
    erased = client.post("/api/customers/erase", json={"email": ANN[0], "confirm": ANN[0]})
    assert erased.status_code == 200, erased.get_data(as_text=True)
    counts = erased.get_json()["counts"]
    assert counts["tickets"] == 5 and counts["attachments"] == 1 and counts["ratings"] == 1
    assert counts["raw_mail"] == 4 and counts["outbox"] >= 1 and counts["candidates"] == 1

    session.expire_all()
    assert scan(session, ann_needles, [ANN[2]]) == []
    assert customer_rows(session, BEA[0]) == bea_before
    assert deflection_report(session, days=7).total == counts_before  # aggregates stay
    assert session.execute(team_mail).scalar_one() >= 1  # Bea's
    # A busy minute's notifications share one e-mail (a batch): Ann's parts went, Bea's stayed.
    team_bodies = " ".join(session.execute(sa.text("SELECT body FROM mail_outbox "
                                                   "WHERE to_address = 'team@example.com'")).scalars())
    assert BEA[1][1] in team_bodies and ANN[1][1] not in team_bodies
    assert {hit[2] for hit in scan(session, bea_needles, [BEA[2]])} >= {BEA[0], BEA[2].hex()}
    event = session.execute(sa.text("SELECT kind, actor, counts FROM privacy_events")).one()
    assert event.kind == "erase" and event.actor == "token:tests" and event.counts == counts


def test_erase_needs_the_address_typed_twice_and_an_admin(client, anonymous_client, app, runtime):
    assert_error(client.post("/api/customers/erase", json={"email": "a@example.com", "confirm": "b@example.com"}),
                 400, "validation_error")
    assert_error(client.post("/api/customers/erase", json={"email": "not-an-address", "confirm": "not-an-address"}),
                 400, "validation_error")
    assert_error(client.post("/api/customers/erase", json={"email": "a@example.com"}), 400, "validation_error")
    assert_error(anonymous_client.post("/api/customers/erase", json={"email": "a@example.com",
                                                                     "confirm": "a@example.com"}), 401, "unauthorized")
    assert_error(anonymous_client.get("/api/customers/export?email=a@example.com"), 401, "unauthorized")


def test_an_email_arriving_during_an_erasure_waits_and_never_joins_a_half_erased_ticket(db_engine):
    from sqlalchemy.orm import Session

    from service.config import Settings
    from service.privacy.erase import erase_customer
    from service.runtime import Runtime

    with db_engine.begin() as conn:
        ticket_id = conn.execute(sa.text(
            "INSERT INTO tickets (subject, body, customer_email, status, state) VALUES "
            "('Order brambleweft', 'Broken.', :email, 'needs_agent', 'open') RETURNING id"), {"email": ANN[0]}).scalar()
    runtime = Runtime.start(Settings.from_env(), migrate=False, seed=False)
    raw = email_bytes(sender=ANN[0], subject=f"Re: Order brambleweft [T-{ticket_id}]", message_id="<race@c.test>",
                      body="Any news about the zephyrcorn?")
    outcome: dict = {}
    try:
        eraser = Session(db_engine)
        assert erase_customer(eraser, ANN[0], actor="test").counts["tickets"] == 1  # locks held, not committed
        mail = threading.Thread(target=lambda: outcome.update(result=receive_email(
            runtime, raw, ticket_link=lambda i, s: f"/help/tickets/{i}")))
        mail.start()
        mail.join(1.5)
        assert mail.is_alive()  # waiting on the address's lock, not writing into the ticket being erased
        eraser.commit()
        eraser.close()
        mail.join(60)
        assert not mail.is_alive()
    finally:
        runtime.close()
    assert outcome["result"].action == "new_ticket"  # its old ticket is gone: the e-mail starts a whole new one
    with db_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM ticket_messages WHERE ticket_id = :t"),
                            {"t": ticket_id}).scalar() == 0
        tickets = conn.execute(sa.text("SELECT id, (SELECT count(*) FROM ticket_messages m WHERE m.ticket_id = t.id) "
                                       "FROM tickets t WHERE customer_email = :e"), {"e": ANN[0]}).all()
    assert len(tickets) == 1 and tickets[0][0] != ticket_id and tickets[0][1] >= 1


def test_an_agent_may_neither_export_nor_erase_a_customer(app, runtime):
    from service.accounts import create_token

    with runtime.session() as session:
        _, secret = create_token(session, "agent script", role="agent")
    agent = app.test_client()
    agent.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
    assert_error(agent.get("/api/customers/export?email=a@example.com"), 403, "forbidden")
    assert_error(agent.post("/api/customers/erase", json={"email": "a@example.com", "confirm": "a@example.com"}),
                 403, "forbidden")
    assert agent.get("/api/articles").status_code == 200  # the same token reads what agents may


def test_erasing_a_customer_removes_their_widget_conversations_and_keeps_anothers(seeded, client):
    from .test_widget import PASSWORD_QUESTION, ask, start, widget_app

    widget = widget_app(seeded).test_client()
    tokens = {}
    for email, words in (("wanda@example.com", "Quixotic umbrella"), ("otto@example.com", "Zephyr marmalade")):
        token = start(widget).get_json()["token"]
        ask(widget, token, f"{PASSWORD_QUESTION} {words}").get_data()
        assert widget.post("/widget/api/handoff", json={"email": email},
                           headers={"X-Widget-Token": token}).status_code == 201
        tokens[email] = token
    count = sa.text("SELECT count(*) FROM widget_messages WHERE body ILIKE :w")
    with seeded.session() as session:
        assert session.execute(count, {"w": "%quixotic%"}).scalar_one() >= 1
        assert scan(session, ["wanda@example.com", "Quixotic"], [])
    exported = client.get("/api/customers/export?email=wanda@example.com")
    with zipfile.ZipFile(io.BytesIO(exported.data)) as archive:
        [chat] = json.loads(archive.read("chat.json"))
    assert chat["email"] == "wanda@example.com" and "Quixotic" in chat["messages"][0]["body"]
    assert "Zephyr" not in json.dumps(chat) and "chat.json" in archive.namelist()
    erased = client.post("/api/customers/erase", json={"email": "wanda@example.com", "confirm": "wanda@example.com"})
    assert erased.status_code == 200, erased.get_data(as_text=True)
    assert erased.get_json()["counts"]["widget_conversations"] == 1
    with seeded.session() as session:
        assert scan(session, ["wanda@example.com", "Quixotic"], []) == []
        assert session.execute(count, {"w": "%zephyr%"}).scalar_one() >= 1  # the other visitor's stays
    assert widget.get("/widget/api/messages", headers={"X-Widget-Token": tokens["wanda@example.com"]}).status_code \
        in (401, 404)
