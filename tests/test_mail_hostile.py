"""Hostile and odd mail (issue 32): bounded work per message, no injected header, never a 500, strict senders, no
relay, automatic mail recognised, every word kept, caps per endpoint. Through the signed webhook (Flask test client),
``supportrag mail pipe`` and a real SMTP server on loopback (aiosmtpd), on the real PostgreSQL."""

from __future__ import annotations

import base64
import dataclasses
import html
import ssl
import subprocess
import time
from email.message import EmailMessage

import pytest
import sqlalchemy as sa
from aiosmtpd.controller import Controller
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from service.cli.main import main
from service.config import Settings
from service.db.models import InboundEmail, MailOutbox, Ticket
from service.intake import receive
from service.intake.html_text import html_to_text
from service.intake.parse import parse_email
from service.intake.quoted import strip_quoted
from service.intake.receive import MAX_ATTEMPTS, receive_email
from service.intake.senders import strict_mailbox
from service.intake.signature import SignatureError, parse_signature
from service.mail.compose import header_safe, message_ids
from service.mail.delivery import deliver_due_mail
from service.mail.transport import SmtpTransport

from .smtp_server import SmtpSink
from .smtp_server import _Keep as Keep
from .test_mail_inbound import SECRET, email_bytes, outcome_of

BUDGET_SECONDS = 5.0  # wide on purpose (2 shared cores); each is linear and takes well under a second alone
MEBIBYTE = 1024 * 1024
HANDED_OFF = "Do you ship parrot food to Mars?"  # nothing in the seed articles: handed to an agent
CVE_SUBJECT = "Parrot =?utf-8?q?food=0D=0AX-Injected:=20yes=0D=0A=0D=0A<a href=3Devil>?="
CVE_BASE64 = "=?utf-8?b?Zm9vZA0KWC1JbmplY3RlZDogeWVz?="  # "food\r\nX-Injected: yes"


@pytest.fixture
def smtp():
    """A running SMTP server on 127.0.0.1."""
    with SmtpSink() as sink:
        yield sink


@pytest.fixture
def mailing(seeded, smtp):
    """The test runtime sending to ``smtp``, the webhook on, the team notified at one address."""
    seeded.settings = dataclasses.replace(
        seeded.settings, smtp_host="127.0.0.1", smtp_port=smtp.port, mail_from="Support <support@example.com>",
        mail_reply_to="support+{token}@example.com", inbound_email_secret=SECRET,
        public_url="https://help.example.com", notify_team_address="team@example.com")
    return seeded


def deliver(runtime):
    """One worker pass over the real SMTP server."""
    return deliver_due_mail(runtime.session, runtime.settings, SmtpTransport(runtime.settings, timeout=5))


def _timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started


# Item 1: every parser and cut has a 1 MiB adversarial budget, on text and HTML bodies.

ADVERSARIAL_HTML = {
    "lt-without-gt": "<" * MEBIBYTE,
    "unclosed-tags": "<a" * (MEBIBYTE // 2),  # html.parser on 3.11.7: minutes (CVE-2025-6069)
    "unclosed-comments": "<!--" * (MEBIBYTE // 4),
    "unclosed-attributes": "<a b='" * (MEBIBYTE // 6),
    "unclosed-scripts": "<script>" * (MEBIBYTE // 8),
    "ampersands": "&" * MEBIBYTE,
    "long-entities": "&" + "a" * 31 * (MEBIBYTE // 32),
}


@pytest.mark.parametrize("body", ADVERSARIAL_HTML.values(), ids=ADVERSARIAL_HTML.keys())
def test_item_1_html_to_text_is_linear_on_adversarial_megabytes(body):
    _, seconds = _timed(html_to_text, body)
    assert seconds < BUDGET_SECONDS


@pytest.mark.parametrize("html, text", [
    ("<p>Hello <b>there</b></p><div>a &lt; b</div>", ["Hello", "there", "a < b"]),
    ("3 < 4 and 5 > 2<br>next", ["3 < 4 and 5 > 2", "next"]),
    ("<style>p{}</style><script>evil()</script>shown<!-- hidden -->", ["shown"]),
])
def test_item_1_html_to_text_keeps_the_visible_words(html, text):
    result = html_to_text(html)
    assert all(piece in result for piece in text)
    assert "evil" not in result and "hidden" not in result and "p{}" not in result


ADVERSARIAL_TEXT = {
    "quoted-one-line": "On " + "a " * (MEBIBYTE // 2),
    "quoted-many-lines": ("On " + "a " * 60 + "\n") * 8_000,
    "outlook-headers": ("From: x\n" * (MEBIBYTE // 8)),
    "quote-marks": "> " * (MEBIBYTE // 2),
    "blank-lines": "\n" * MEBIBYTE,
}


@pytest.mark.parametrize("body", ADVERSARIAL_TEXT.values(), ids=ADVERSARIAL_TEXT.keys())
def test_item_1_the_quoted_history_cut_is_linear_on_adversarial_megabytes(body):
    _, seconds = _timed(strip_quoted, body)
    assert seconds < BUDGET_SECONDS


@pytest.mark.parametrize("value", [
    "(" * MEBIBYTE, "\\" * MEBIBYTE, '"' * MEBIBYTE, "<" * MEBIBYTE, "a@b.c, " * (MEBIBYTE // 7),
], ids=["parens", "backslashes", "quotes", "angles", "list"])
def test_item_1_sender_parsing_and_header_cleaning_are_bounded(value):
    _, seconds = _timed(strict_mailbox, [value])
    assert seconds < BUDGET_SECONDS
    _, seconds = _timed(header_safe, value + "=?utf-8?q?a=0D=0A?=" * 1000)
    assert seconds < BUDGET_SECONDS


@pytest.mark.parametrize("name", ["Subject", "From", "Cc", "X-Loop", "References", "Return-Path"])
def test_item_1_a_megabyte_of_encoded_words_in_a_header_is_read_within_the_budget(name):
    raw = (f"{name}: " + "=?utf-8?q?a=0D=0A?= " * 50_000 + "\r\nTo: support@example.com\r\n\r\nbody").encode()
    mail, seconds = _timed(parse_email, raw)  # decode_header alone is quadratic: 13 s at 64 Ki words
    assert seconds < BUDGET_SECONDS and "\n" not in mail.subject and "\r" not in mail.subject


def test_item_1_the_webhook_signature_parser_is_bounded():
    started = time.perf_counter()
    with pytest.raises(SignatureError):
        parse_signature("v1=" + "a," * (MEBIBYTE // 2))
    assert time.perf_counter() - started < BUDGET_SECONDS


@pytest.mark.parametrize("subtype", ["html", "plain"])
def test_item_1_a_megabyte_body_parses_within_the_budget(subtype):
    message = EmailMessage()
    message["From"], message["Subject"] = "bob@example.com", "Big"
    message.set_content("<a" * (MEBIBYTE // 2) if subtype == "html" else "On " + "a " * (MEBIBYTE // 2),
                        subtype=subtype)
    mail, seconds = _timed(parse_email, bytes(message))
    assert seconds < BUDGET_SECONDS and mail.problem is None and mail.text


def test_item_1_a_256_kib_html_body_of_lt_is_stored_within_10_seconds(inbound, anonymous_client, session):
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "bob@example.com", "support@example.com", "Angles"
    message["Message-ID"] = "<angles@customer.test>"
    message.set_content("<" * (256 * 1024), subtype="html")
    outcome, seconds = _timed(lambda: outcome_of(anonymous_client, bytes(message)))
    assert seconds < 10 and outcome["action"] == "new_ticket"
    assert session.scalar(sa.select(InboundEmail.status).where(InboundEmail.message_id == "<angles@customer.test>")) \
        == "processed"


def test_item_1_the_attempt_is_committed_before_parsing_and_a_killer_is_quarantined(inbound, monkeypatch, session):
    def killed(raw):  # what a worker killed mid-parse leaves behind: nothing after the attempt's commit
        raise SystemExit("worker killed")

    raw = email_bytes(message_id="<killer@customer.test>")
    monkeypatch.setattr(receive, "parse_email", killed)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with pytest.raises(SystemExit):
            receive_email(inbound, raw, ticket_link=lambda i, k: "https://help.example.com/x")
        assert session.scalar(sa.select(InboundEmail.attempts).execution_options(populate_existing=True)
                              .where(InboundEmail.message_id == "<killer@customer.test>")) == attempt
    outcome = receive_email(inbound, raw, ticket_link=lambda i, k: "https://help.example.com/x")
    assert outcome.action == "quarantined" and f"after {MAX_ATTEMPTS} attempts" in outcome.reason
    assert session.scalar(sa.select(sa.func.count()).select_from(Ticket)) == 0


@pytest.fixture
def inbound(runtime):
    """The runtime with the webhook on and plus-addressed replies (SMTP named, never reached: no worker runs)."""
    runtime.settings = dataclasses.replace(
        runtime.settings, smtp_host="127.0.0.1", smtp_port=9, mail_from="Support <support@example.com>",
        mail_reply_to="support+{token}@example.com", inbound_email_secret=SECRET)
    return runtime


# Item 2: no customer value can add a header line, on Python 3.11.7 (CVE-2024-6923).

@pytest.mark.parametrize("value", [CVE_SUBJECT, CVE_BASE64, "a\r\nX-Injected: yes", "a\x00b\x1bc\x85d",
                                   "=?utf-8?q?=3D=3Futf-8=3Fq=3Fa=3D0D=3D0AX-Injected:=3D20yes=3F=3D?="])
def test_item_2_header_safe_leaves_no_control_character_after_decoding(value):
    cleaned = header_safe(value)
    for _ in range(3):  # whatever a policy decodes later, no line break comes out
        cleaned = header_safe(cleaned)
        assert not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in cleaned)
    assert "=?" not in header_safe(value) or "?=" not in header_safe(value).split("=?", 1)[1]


def test_item_2_only_well_formed_message_ids_thread():
    assert message_ids("<a.b@c.d> <=?utf-8?q?x=0D=0A?=@e.f> junk <g h@i> <ok@x>") == ["<a.b@c.d>", "<ok@x>"]


def _headers_of(message) -> list[str]:
    return sorted(name.lower() for name in message.keys())


def test_item_2_cve_payloads_reach_no_header_of_any_email(mailing, smtp, client, session):
    created = client.post("/api/tickets", json={"subject": CVE_SUBJECT, "body": HANDED_OFF,
                                                "email": "alice@example.com"})
    assert created.status_code == 201, created.get_data(as_text=True)
    ticket_id = created.get_json()["ticket"]["id"]  # handed off: an acknowledgement and a team notification
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"})  # agent reply
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Done.", "status": "solved"})  # rating link
    queued = session.scalar(sa.select(sa.func.count()).select_from(MailOutbox))
    assert queued >= 4
    deliver(mailing)
    inbox = smtp.wait_for(queued)
    assert len(inbox) == queued
    for message in inbox:
        assert "x-injected" not in _headers_of(message), message
        assert message.get_content_type() == "text/plain"
        assert "\n" not in str(message["Subject"]) and "\r" not in str(message["Subject"])
        assert "evil" not in message.get_body().get_content().split("\n--\n")[0] or message["To"] == \
            "team@example.com"
    recipients = sorted(str(m["To"]) for m in inbox)
    assert "team@example.com" in recipients and recipients.count("alice@example.com") == queued - 1


# Item 3: never a 500 on headers.

NESTED_FROM = (b"From: " + b"(" * 600 + b"bob@example.com\r\nTo: support@example.com\r\nSubject: Nested\r\n"
               b"Message-ID: <nested@customer.test>\r\n\r\nMy printer jams.\r\n")


def test_item_3_600_nested_comments_in_from_are_stored_with_a_2xx(inbound, anonymous_client, session):
    outcome = outcome_of(anonymous_client, NESTED_FROM)
    assert outcome["action"] in ("new_ticket", "quarantined")
    row = session.scalars(sa.select(InboundEmail).where(InboundEmail.message_id == "<nested@customer.test>")).one()
    assert row.raw == NESTED_FROM and row.status in ("processed", "quarantined")
    if outcome["action"] == "new_ticket":  # an unknown sender: nobody is mailed, nothing joins a thread
        assert session.get(Ticket, outcome["ticket_id"]).customer_email is None


def test_item_3_mail_pipe_exits_0_on_600_nested_comments(cli_env):
    result = CliRunner().invoke(main, ["mail", "pipe"], input=NESTED_FROM)
    assert result.exit_code == 0 and '"action"' in result.output, result.output


# Item 4: strict senders.

def _bobs_thread(client) -> tuple[int, str]:
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "bob@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet exactly?"})
    return ticket_id, reply.get_json()["message"]["email_message_id"]


AMBIGUOUS_FROM = {
    "address-as-name": b"From: bob@example.com <mallory@evil.example>\r\n",
    "two-headers": b"From: bob@example.com\r\nFrom: mallory@evil.example\r\n",
    "two-addresses": b"From: bob@example.com, mallory@evil.example\r\n",
    "two-without-comma": b"From: bob@example.com mallory@evil.example\r\n",
    "group": b"From: friends: bob@example.com, mallory@evil.example;\r\n",
    "unbalanced": b"From: (bob@example.com <mallory@evil.example>\r\n",
    "domain-literal": b"From: bob@[127.0.0.1]\r\n",
}


@pytest.mark.parametrize("from_lines", AMBIGUOUS_FROM.values(), ids=AMBIGUOUS_FROM.keys())
def test_item_4_an_ambiguous_from_never_joins_bobs_thread(inbound, client, anonymous_client, from_lines):
    ticket_id, reply_id = _bobs_thread(client)
    before = client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"]
    raw = (from_lines + b"To: support@example.com\r\nSubject: Re: Parrot food [T-%d]\r\n"
           b"Message-ID: <amb@evil.example>\r\nIn-Reply-To: %s\r\n\r\nSend me the invoice.\r\n"
           % (ticket_id, reply_id.encode()))
    outcome = outcome_of(anonymous_client, raw)
    assert outcome["action"] == "new_ticket" and outcome["ticket_id"] != ticket_id
    assert client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"] == before


def test_item_4_a_well_formed_from_still_follows_up(inbound, client, anonymous_client):
    ticket_id, reply_id = _bobs_thread(client)
    raw = email_bytes(sender='"Bob (home)" <bob@example.com>', in_reply_to=reply_id, message_id="<ok@c.test>",
                      body="Mars, please.")
    assert outcome_of(anonymous_client, raw)["action"] == "follow_up"


def test_item_4_two_ticket_tags_match_nothing(inbound, client, anonymous_client):
    first, _ = _bobs_thread(client)
    second, _ = _bobs_thread(client)
    raw = email_bytes(sender="bob@example.com", subject=f"Re: [T-{second}] and [T-{first}]",
                      message_id="<two@c.test>", body="Which one?")
    outcome = outcome_of(anonymous_client, raw)
    assert outcome["action"] == "new_ticket" and outcome["ticket_id"] not in (first, second)


def test_item_4_an_internationalised_sender_gets_a_ticket(inbound, anonymous_client, session):
    raw = ("From: Jörg <jörg@bücher.example>\r\nTo: support@example.com\r\nSubject: Bücher\r\n"
           "Message-ID: <jorg@c.test>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nWo ist meine Bestellung?\r\n"
           ).encode("utf-8")
    outcome = outcome_of(anonymous_client, raw)
    assert outcome["action"] == "new_ticket"
    assert session.get(Ticket, outcome["ticket_id"]).customer_email == "jörg@bücher.example"


# Item 5: no relay.

def test_item_5_an_ack_for_someone_elses_address_carries_none_of_the_submitters_words(mailing, smtp, client,
                                                                                       session):
    words = "Parrot phishing https://evil.example/login"
    created = client.post("/api/tickets", json={"subject": words, "body": HANDED_OFF + " " + words,
                                                "email": "victim@example.com"})
    assert created.status_code == 201
    deliver(mailing)
    ack = next(m for m in smtp.wait_for(2) if str(m["To"]) == "victim@example.com")
    text = str(ack["Subject"]) + ack.get_body().get_content()
    assert "phishing" not in text and "evil.example" not in text and "Parrot" not in text
    assert f"T-{created.get_json()['ticket']['id']}" in text


def test_item_5_an_email_ack_goes_to_from_never_to_reply_to_and_quotes_the_writer(mailing, smtp, anonymous_client):
    raw = email_bytes(sender="carol@example.com", subject="Parrot food", message_id="<rt@c.test>",
                      body=HANDED_OFF).replace(b"To: ", b"Reply-To: victim@example.com\r\nTo: ", 1)
    assert outcome_of(anonymous_client, raw)["action"] == "new_ticket"
    deliver(mailing)
    customers = [m for m in smtp.wait_for(2) if str(m["To"]) != "team@example.com"]
    assert [str(m["To"]) for m in customers] == ["carol@example.com"]
    assert "Parrot food" in str(customers[0]["Subject"])  # she wrote to us herself: her subject is echoed


def test_item_5_acknowledgements_are_limited_per_mailbox_with_plus_tags_folded(mailing, client, session):
    limit = mailing.settings.mail_ack_per_address_per_hour
    for n in range(limit + 3):
        client.post("/api/tickets", json={"subject": "Parrot", "body": HANDED_OFF, "email": f"Victim+{n}@example.com"})
    acks = session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
        MailOutbox.auto_submitted.is_not(None), MailOutbox.to_address.ilike("victim%")))
    assert acks == limit


def test_item_5_acknowledgements_are_limited_per_domain(mailing, client, session):
    mailing.settings = dataclasses.replace(mailing.settings, mail_ack_per_domain_per_hour=2)
    for n in range(4):
        client.post("/api/tickets", json={"subject": "Parrot", "body": HANDED_OFF, "email": f"p{n}@victim.example"})
    assert session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
        MailOutbox.auto_submitted.is_not(None), MailOutbox.to_address.like("%@victim.example"))) == 2


# Item 6: automatic mail is stored and shown, never acknowledged or notified.

AUTOMATIC = {
    "null-return-path": b"Return-Path: <>\r\n",
    "list-id": b"List-Id: Parrots <parrots.lists.example>\r\n",
    "x-loop": b"X-Loop: support@example.com\r\n",
    "x-autogenerated": b"X-Autogenerated: Reply\r\n",
    "x-auto-response-suppress": b"X-Auto-Response-Suppress: All\r\n",
    "x-failed-recipients": b"X-Failed-Recipients: nobody@example.com\r\n",
    "auto-submitted": b"Auto-Submitted: auto-replied\r\n",
    "precedence-bulk": b"Precedence: bulk\r\n",
}


@pytest.mark.parametrize("header", AUTOMATIC.values(), ids=AUTOMATIC.keys())
def test_item_6_automatic_mail_is_stored_with_no_ticket_no_ack_no_notification(mailing, anonymous_client, session,
                                                                                 admin_client, header):
    raw = header + email_bytes(sender="robot@example.com", message_id="<auto@c.test>", body=HANDED_OFF)
    outcome = outcome_of(anonymous_client, raw)
    assert outcome["action"] == "ignored" and outcome["reason"]
    assert session.scalar(sa.select(InboundEmail.status).where(InboundEmail.message_id == "<auto@c.test>")) \
        == "ignored"
    assert session.scalar(sa.select(sa.func.count()).select_from(MailOutbox)) == 0
    assert session.scalar(sa.select(sa.func.count()).select_from(Ticket)) == 0
    shown = admin_client.get("/admin/mail").get_data(as_text=True).split('id="automatic-mail"')[1]
    assert "robot@example.com" in shown and html.escape(outcome["reason"][:12], quote=False) in shown


def test_item_6_a_delivery_status_report_is_automatic(mailing, anonymous_client, session):
    raw = (b"From: mx@example.net\r\nTo: support@example.com\r\nSubject: Undelivered\r\nMessage-ID: <dsn@c.test>\r\n"
           b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n"
           b"Your message could not be delivered.\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\n"
           b"Reporting-MTA: dns; mx.example.net\r\n\r\nFinal-Recipient: rfc822; x@example.org\r\n--b--\r\n")
    assert outcome_of(anonymous_client, raw)["action"] == "ignored"
    assert session.scalar(sa.select(sa.func.count()).select_from(MailOutbox)) == 0


# Item 7: every word reaches the ticket.

def _first_message(client, ticket_id: int) -> dict:
    return client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"][0]


def _mime(top: bytes, *parts: bytes, boundary: bytes = b"b") -> bytes:
    """A multipart message of ``parts`` (each its headers, a blank line and its content)."""
    body = b"".join(b"--" + boundary + b"\r\n" + part + b"\r\n" for part in parts)
    return top + b"Content-Type: multipart/mixed; boundary=" + boundary + b"\r\n\r\n" + body + b"--" + boundary \
        + b"--\r\n"


def _top(message_id: str, sender: bytes = b"bob@example.com") -> bytes:
    return (b"From: " + sender + b"\r\nTo: support@example.com\r\nSubject: Printer\r\nMessage-ID: "
            + message_id.encode() + b"\r\nMIME-Version: 1.0\r\n")


PNG = b"Content-Type: image/png; name=photo.png\r\nContent-Disposition: inline; filename=photo.png\r\n" \
      b"Content-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo="


def test_item_7_text_after_an_inline_image_reaches_the_ticket(inbound, anonymous_client, client):
    raw = _mime(_top("<img@c.test>"), b"Content-Type: text/plain\r\n\r\nMy printer shows this:", PNG,
                b"Content-Type: text/plain\r\n\r\nand then it stops printing entirely.")
    outcome = outcome_of(anonymous_client, raw)
    message = _first_message(client, outcome["ticket_id"])
    body = message["body"]
    assert body.index("My printer shows this:") < body.index("[image: photo.png]") \
        < body.index("and then it stops printing entirely.")
    assert [a["filename"] for a in message["attachments"]] == ["photo.png"]


def test_item_7_html_is_read_only_when_there_is_no_plain_text(inbound, anonymous_client, client):
    alternative = (b"Content-Type: multipart/alternative; boundary=alt\r\n\r\n--alt\r\nContent-Type: text/plain\r\n\r\n"
                   b"Plain words.\r\n--alt\r\nContent-Type: text/html\r\n\r\n<p>Html words.</p>\r\n--alt--")
    outcome = outcome_of(anonymous_client, _mime(_top("<alt@c.test>"), alternative))
    body = _first_message(client, outcome["ticket_id"])["body"]
    assert "Plain words." in body and "Html words." not in body
    html_only = _mime(_top("<html@c.test>"), b"Content-Type: text/html\r\n\r\n<p>Only <b>html</b> words &amp; more</p>")
    body = _first_message(client, outcome_of(anonymous_client, html_only)["ticket_id"])["body"]
    assert "Only" in body and "html" in body and "words & more" in body and "<p>" not in body


FORWARDED_INVOICE = ("Please check this invoice, it charges me twice.\n\n"
                     "---------- Forwarded message ---------\nDe: Billing <billing@shop.example>\n"
                     "A: bob@example.com\nDate: Mon, 1 Dec 2026\nSubject: Invoice 4711\n\n"
                     "Invoice 4711: 2 x Parrot food, 49.90 EUR each.\n")


def test_item_7_a_forwarded_invoice_in_a_new_ticket_is_not_cut(inbound, anonymous_client, client):
    outcome = outcome_of(anonymous_client, email_bytes(message_id="<fwd@c.test>", body=FORWARDED_INVOICE))
    body = _first_message(client, outcome["ticket_id"])["body"]
    assert "Invoice 4711: 2 x Parrot food, 49.90 EUR each." in body and "De: Billing" in body


def test_item_7_a_follow_up_still_has_its_quoted_history_cut(inbound, client, anonymous_client):
    ticket_id, reply_id = _bobs_thread(client)
    raw = email_bytes(in_reply_to=reply_id, message_id="<cut@c.test>",
                      body="Mars, please.\n\nOn Mon, 1 Dec 2026, Support wrote:\n> Which planet exactly?\n")
    assert outcome_of(anonymous_client, raw)["action"] == "follow_up"
    message = client.get(f"/api/tickets/{ticket_id}/messages").get_json()["messages"][-1]
    assert message["body"] == "Mars, please."
    [history] = message["attachments"]  # the cut part is kept, collapsed into a file
    assert history["filename"] == "quoted-history.txt"
    assert b"> Which planet exactly?" in client.get(history["url"]).data


def test_item_7_a_text_longer_than_a_ticket_body_reaches_the_ticket_whole_as_a_file(inbound, anonymous_client,
                                                                                     client):
    words = [f"word{n}" for n in range(12_000)]  # about 110,000 characters, over the 20,000 of a ticket's body
    raw = email_bytes(message_id="<long@c.test>", body="Here is my log:\n" + " ".join(words))
    message = _first_message(client, outcome_of(anonymous_client, raw)["ticket_id"])
    assert message["body"].startswith("Here is my log:\nword0 word1")
    assert message["body"].endswith("all of it is attached as full-message.txt]") and len(message["body"]) <= 20_000
    [whole] = message["attachments"]
    assert whole["filename"] == "full-message.txt"
    assert set(client.get(whole["url"]).data.decode().split()) >= set(words)  # every word


def test_item_7_an_attached_message_becomes_an_eml_and_its_text_is_shown(inbound, anonymous_client, client):
    inner = (b"From: Billing <billing@shop.example>\r\nSubject: Invoice 4711\r\nContent-Type: multipart/mixed; "
             b"boundary=in\r\n\r\n--in\r\nContent-Type: text/plain\r\n\r\nInvoice 4711: 2 x Parrot food.\r\n"
             b"--in\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=invoice-4711.pdf"
             b"\r\n\r\n%PDF-1.4 invoice\r\n--in--\r\n")
    raw = _mime(_top("<rfc822@c.test>"), b"Content-Type: text/plain\r\n\r\nSee the forwarded invoice.",
                b"Content-Type: message/rfc822\r\n\r\n" + inner)
    message = _first_message(client, outcome_of(anonymous_client, raw)["ticket_id"])
    body = message["body"]
    assert body.index("See the forwarded invoice.") < body.index("Forwarded message") \
        < body.index("Invoice 4711: 2 x Parrot food.")
    eml, pdf = message["attachments"]  # the forwarded message whole, and the invoice inside it
    assert eml["filename"].endswith(".eml") and eml["content_type"] == "message/rfc822"
    assert pdf["filename"] == "invoice-4711.pdf"
    assert b"Invoice 4711: 2 x Parrot food." in client.get(eml["url"]).data


def test_item_7_parts_over_the_limit_are_noted(inbound, anonymous_client, client):
    files = [b"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f%d.bin\r\n\r\nx"
             % n for n in range(600)]
    raw = _mime(_top("<many@c.test>"), b"Content-Type: text/plain\r\n\r\nMany files.", *files)
    message = _first_message(client, outcome_of(anonymous_client, raw)["ticket_id"])
    assert "101 part(s) over the limit of 500" in message["body"]


def test_item_7_bidi_controls_are_removed_from_file_names(inbound, anonymous_client, client):
    raw = email_bytes(message_id="<bidi@c.test>", attachments=[("invoice\u202egpj.exe", "application/pdf", b"MZ")])
    message = _first_message(client, outcome_of(anonymous_client, raw)["ticket_id"])
    assert [a["filename"] for a in message["attachments"]] == ["invoicegpj.exe"]


# Item 8: caps per endpoint.

def test_item_8_a_webhook_email_with_a_3_mb_photo_is_stored_with_the_photo_listed(inbound, anonymous_client, client,
                                                                                    app):
    photo = bytes(range(256)) * (3_000_000 // 256)
    assert len(photo) > app.config["MAX_CONTENT_LENGTH"]  # the JSON APIs' cap stays 1 MiB
    raw = email_bytes(message_id="<photo@c.test>", body="A photo of the jam.",
                      attachments=[("jam.jpg", "image/jpeg", photo)])
    message = _first_message(client, outcome_of(anonymous_client, raw)["ticket_id"])
    [listed] = message["attachments"]
    assert (listed["filename"], listed["size"]) == ("jam.jpg", len(photo))


def test_item_8_mail_pipe_stores_an_oversized_message_truncated_and_quarantined(cli_env, monkeypatch, db_engine):
    monkeypatch.setenv("INBOUND_RAW_MAX_BYTES", "4096")
    raw = email_bytes(message_id="<big@c.test>", body="x" * 20_000)
    result = CliRunner().invoke(main, ["mail", "pipe"], input=raw)
    assert result.exit_code == 0 and '"action": "quarantined"' in result.output, result.output
    with db_engine.connect() as conn:
        row = conn.execute(sa.select(InboundEmail.size, InboundEmail.raw_truncated, sa.func.length(InboundEmail.raw))
                           .where(InboundEmail.message_id == "<big@c.test>")).one()
    assert tuple(row) == (len(raw), True, 4096)


# Item 9: verified TLS (a TLS-only aiosmtpd with a self-signed certificate made here by the openssl CLI).

@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key: (cert.pem, key.pem)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


class TlsSink(SmtpSink):
    """An SMTP server that only talks TLS: implicit (SMTPS, port 465 style) or STARTTLS required before MAIL."""

    def __init__(self, certificate: tuple[str, str], *, implicit: bool) -> None:
        super().__init__()
        self.certificate, self.implicit = certificate, implicit

    def start(self) -> "TlsSink":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*self.certificate)
        options = {"ssl_context": context} if self.implicit else {"tls_context": context, "require_starttls": True}
        self._controller = Controller(Keep(self.inbox, self.refused), hostname="127.0.0.1", port=self.port,
                                      **options)
        self._controller.start()
        return self


@pytest.mark.parametrize("mode", ["implicit", "starttls"])
def test_item_9_nothing_goes_to_an_untrusted_certificate_and_all_goes_with_smtp_ca_file(runtime, session, admin_client,
                                                                                        certificate, mode):
    with TlsSink(certificate, implicit=mode == "implicit") as sink:
        runtime.settings = dataclasses.replace(runtime.settings, smtp_host="127.0.0.1", smtp_port=sink.port,
                                               smtp_tls=mode, smtp_ca_file=None, mail_from="support@example.com")
        with runtime.session() as writing:
            writing.add(MailOutbox(to_address="alice@example.com", subject="Hello", body="b",
                                   message_id="<tls1@example.com>"))
        assert deliver(runtime).sent == 0 and sink.inbox == []
        row = session.scalars(sa.select(MailOutbox).execution_options(populate_existing=True)).one()
        assert row.failed_at is None and row.sent_at is None and "certificate" in row.last_error  # retried
        page = admin_client.get("/admin/mail").get_data(as_text=True)
        assert 'id="retrying-mail"' in page and "SMTP_CA_FILE" in page.split('id="retrying-mail"')[1]
        runtime.settings = dataclasses.replace(runtime.settings, smtp_ca_file=certificate[0])
        session.execute(sa.update(MailOutbox).values(next_attempt_at=sa.func.now()))
        session.flush()
        assert deliver(runtime).sent == 1
        assert [str(m["Subject"]) for m in sink.wait_for(1)] == ["Hello"]


def test_item_9_starttls_is_never_downgraded_to_plain_text(runtime, session, smtp):
    runtime.settings = dataclasses.replace(runtime.settings, smtp_host="127.0.0.1", smtp_port=smtp.port,
                                           smtp_tls="starttls", mail_from="support@example.com")
    with runtime.session() as writing:
        writing.add(MailOutbox(to_address="alice@example.com", subject="Hello", body="b",
                               message_id="<plain1@example.com>"))
    assert deliver(runtime).sent == 0 and smtp.inbox == []
    row = session.scalars(sa.select(MailOutbox).execution_options(populate_existing=True)).one()
    assert row.failed_at is None and "STARTTLS" in row.last_error


@pytest.mark.parametrize("env, mode", [({"SMTP_STARTTLS": "1"}, "starttls"), ({"SMTP_PORT": "465"}, "implicit"),
                                       ({}, "none"), ({"SMTP_TLS": "starttls", "SMTP_PORT": "465"}, "starttls")])
def test_item_9_smtp_tls_keeps_smtp_starttls_as_an_alias(env, mode):
    assert Settings.from_env(env).smtp_tls == mode


# Item 7: a property over generated MIME trees: every text leaf's words reach the body or an attachment.

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=4, max_size=10)


def _leaf_strategy():
    plain = st.builds(lambda words: ("plain", words), st.lists(WORDS, min_size=1, max_size=5))
    html_leaf = st.builds(lambda words: ("html", words), st.lists(WORDS, min_size=1, max_size=5))
    image = st.just(("image", []))
    attached = st.builds(lambda words: ("attached", words), st.lists(WORDS, min_size=1, max_size=3))
    alternative = st.builds(lambda words: ("alternative", words), st.lists(WORDS, min_size=1, max_size=5))
    return st.one_of(plain, html_leaf, image, attached, alternative)


TREES = st.recursive(_leaf_strategy(), lambda children: st.one_of(
    st.builds(lambda parts: ("mixed", parts), st.lists(children, min_size=1, max_size=4)),
    st.builds(lambda parts: ("related", parts), st.lists(children, min_size=1, max_size=3)),
    st.builds(lambda part: ("forwarded", [part]), children)), max_leaves=12)


def _build(tree) -> tuple[EmailMessage, list[str]]:
    """The MIME part for ``tree`` and the words of its text leaves."""
    kind, content = tree
    part = EmailMessage()
    if kind == "plain":
        part.set_content(" ".join(content) + "\n")
    elif kind == "html":
        part.set_content("<p>" + "</p><p>".join(content) + "</p>\n", subtype="html")
    elif kind == "image":
        part.set_content(b"\x89PNG\r\n", maintype="image", subtype="png", disposition="inline", filename="p.png")
    elif kind == "attached":
        part.set_content(" ".join(content) + "\n", disposition="attachment", filename="notes.txt")
    elif kind == "alternative":  # the same words twice, as mail clients send them
        part.set_content(" ".join(content) + "\n")
        part.add_alternative("<p>" + " ".join(content) + "</p>\n", subtype="html")
    elif kind == "forwarded":
        inner, words = _build(content[0])
        inner["Subject"] = "Forwarded"
        part.set_content(inner)
        return part, words
    else:
        words = []
        part.make_mixed() if kind == "mixed" else part.make_related()
        for child in content:
            built, child_words = _build(child)
            part.attach(built)
            words += child_words
        return part, words
    return part, content if kind != "image" else []


@settings(max_examples=60, deadline=None)
@given(TREES)
def test_item_7_every_text_leafs_words_reach_the_body_or_an_attachment(tree):
    message, words = _build(tree)
    message["From"], message["Subject"] = "bob@example.com", "Generated"
    mail = parse_email(bytes(message))
    assert mail.problem is None
    found = mail.text + " ".join(a.content.decode("utf-8", "replace") for a in mail.attachments)
    assert all(word in found for word in words), (words, found)


def test_item_5_acknowledgements_caused_by_one_anonymous_client_are_limited(mailing, anonymous_client, session):
    mailing.settings = dataclasses.replace(mailing.settings, mail_ack_per_client_per_hour=2)
    for n in range(4):
        created = anonymous_client.post("/api/tickets", json={"subject": "Parrot", "body": HANDED_OFF,
                                                              "email": f"c{n}@domain{n}.example"})
        assert created.status_code == 201  # the ticket is stored all the same
    assert session.scalar(sa.select(sa.func.count()).select_from(MailOutbox).where(
        MailOutbox.auto_submitted.is_not(None))) == 2


def test_item_8_reply_attachments_follow_their_own_caps_and_json_keeps_1_mib(mailing, client, app, smtp):
    ticket_id = client.post("/api/tickets", json={"subject": "Parrot", "body": HANDED_OFF,
                                                  "email": "alice@example.com"}).get_json()["ticket"]["id"]
    photo = bytes(range(256)) * (2_000_000 // 256)  # 2 MB: over the JSON cap once base64, within the reply caps
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "The label.", "attachments": [
        {"filename": "label.png", "content_type": "image/png", "content_base64": base64.b64encode(photo).decode()}]})
    assert reply.status_code == 201, reply.get_data(as_text=True)
    too_big = client.post("/api/tickets", json={"subject": "x", "body": "y" * 1000, "pad": "z" * (
        app.config["MAX_CONTENT_LENGTH"] + 10)})
    assert too_big.status_code == 413


class Utf8Sink(SmtpSink):
    """An SMTP server that offers SMTPUTF8, as mainstream servers do."""

    def start(self) -> "Utf8Sink":
        self._controller = Controller(Keep(self.inbox, self.refused), hostname="127.0.0.1", port=self.port,
                                      enable_SMTPUTF8=True)
        self._controller.start()
        return self


def test_item_4_an_internationalised_sender_is_acknowledged_over_smtputf8(seeded, anonymous_client, session):
    with Utf8Sink() as sink:
        seeded.settings = dataclasses.replace(
            seeded.settings, smtp_host="127.0.0.1", smtp_port=sink.port, mail_from="support@example.com",
            mail_reply_to="support+{token}@example.com", inbound_email_secret=SECRET)
        raw = ("From: Jörg <jörg@bücher.example>\r\nTo: support@example.com\r\nSubject: Bücher\r\n"
               "Message-ID: <jorg2@c.test>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
               f"{HANDED_OFF}\r\n").encode("utf-8")
        assert outcome_of(anonymous_client, raw)["action"] == "new_ticket"
        assert deliver(seeded).sent >= 1
        assert [str(m["To"]) for m in sink.wait_for(1)] == ["jörg@xn--bcher-kva.example"]


def test_item_3_raw_8_bit_bytes_in_every_header_are_stored_with_a_2xx(inbound, anonymous_client, session):
    raw = (b"From: J\xf6rg <j\xf6rg@example.com>\r\nCc: \xff\xfe@example.com\r\nMessage-ID: <a\xff@b.example>\r\n"
           b"Subject: \xe9t\xe9\r\nReferences: <r\xff@b.example>\r\nTo: support@example.com\r\n\r\nbody \xff\r\n")
    outcome = outcome_of(anonymous_client, raw)
    assert outcome["action"] in ("new_ticket", "quarantined")
    assert session.scalar(sa.select(sa.func.count()).select_from(InboundEmail)) == 1


def test_item_3_mail_pipe_exits_75_never_1_on_an_unexpected_error(cli_env, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug before anything was stored")

    monkeypatch.setattr("service.cli.mail.receive_email", broken)
    result = CliRunner().invoke(main, ["mail", "pipe"], input=email_bytes(message_id="<bug@c.test>"))
    assert result.exit_code == 75 and "will retry" in result.output


def test_item_5_an_ambiguous_from_never_counts_as_that_address_having_written(mailing, smtp, anonymous_client,
                                                                              client, session):
    raw = email_bytes(sender="bob@example.com <mallory@evil.example>", message_id="<forged@c.test>",
                      subject="Parrot food", body=HANDED_OFF)
    assert outcome_of(anonymous_client, raw)["action"] == "new_ticket"
    assert session.scalar(sa.select(InboundEmail.sender).where(InboundEmail.message_id == "<forged@c.test>")) is None
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "bob@example.com"})
    assert created.get_json()["ticket"]["status"] == "needs_agent"
    deliver(mailing)
    ack = next(m for m in smtp.wait_for(2) if str(m["To"]) == "bob@example.com")
    assert "Parrot" not in str(ack["Subject"]) + ack.get_body().get_content()  # Bob never wrote: nothing quoted
