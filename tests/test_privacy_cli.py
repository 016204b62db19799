"""`supportrag customer export|erase` and GET /api/customers/export (issue 36)."""

from __future__ import annotations

import io
import json
import time
import zipfile

import sqlalchemy as sa

from service.intake.signature import sign

from .helpers import run_cli, run_cli_json
from .test_mail_inbound import email_bytes
from .test_privacy_erase import SECRET, inbound  # noqa: F401 - the fixture

ADDRESS = "cleo.kestrelwick@example.com"
PHOTO = b"\x89PNG-not-really\x00\x01kestrel"
SETUP_SQL = """
WITH t AS (INSERT INTO tickets (subject, body, customer_email, status)
           VALUES ('Broken kestrel lamp', 'The kestrel lamp flickers.', :email, 'needs_agent') RETURNING id),
m AS (INSERT INTO ticket_messages (ticket_id, kind, channel, body)
      SELECT id, 'customer', 'email', 'The kestrel lamp flickers.' FROM t RETURNING id, ticket_id),
a AS (INSERT INTO ticket_attachments (message_id, filename, content_type, size, sha256, content)
      SELECT id, '../photo.png', 'image/png', length(:photo), encode(sha256(:photo), 'hex'), :photo FROM m),
i AS (INSERT INTO inbound_emails (dedupe_key, sha256, size, raw, sender, status, ticket_id)
      SELECT 'k1', 'x', 10, convert_to('From: ' || :email || E'\\r\\n\\r\\nkestrel', 'UTF8'), :email, 'processed', id
      FROM t)
INSERT INTO ticket_ratings (ticket_id, good, comment) SELECT id, true, 'kestrel thanks' FROM t
"""


def _count(db_engine, sql: str) -> int:
    with db_engine.connect() as conn:
        return conn.execute(sa.text(sql)).scalar_one()


def test_cli_exports_a_zip_then_a_dry_run_erases_nothing_and_erase_removes_the_customer(db_engine, tmp_path):
    with db_engine.begin() as conn:
        conn.execute(sa.text(SETUP_SQL), {"email": ADDRESS, "photo": PHOTO})
    out = tmp_path / "cleo.zip"
    assert "1 tickets" in run_cli("customer", "export", "--email", ADDRESS.upper(), "--out", out).output
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        readme = json.loads(archive.read("README.json"))
        [photo] = [name for name in names if "/attachments/" in name]
        assert archive.read(photo) == PHOTO and ".." not in photo
        [raw] = [name for name in names if name.startswith("raw_mail/")]
        assert b"kestrel" in archive.read(raw)
        ticket_id = json.loads(archive.read([n for n in names if n.endswith("ticket.json")][0]))["id"]
        assert json.loads(archive.read(f"tickets/{ticket_id}/ratings.json"))[0]["comment"] == "kestrel thanks"
    assert set(readme["files"]) == set(names)

    dry = run_cli_json("customer", "erase", "--email", ADDRESS, "--dry-run")
    assert dry["dry_run"] is True and dry["counts"]["tickets"] == 1 and dry["counts"]["raw_mail"] == 1
    assert _count(db_engine, "SELECT count(*) FROM tickets") == 1
    erased = run_cli("customer", "erase", "--email", ADDRESS).output
    assert "erased" in erased and "attachments: 1" in erased
    assert _count(db_engine, "SELECT count(*) FROM tickets WHERE customer_email IS NOT NULL OR erased_at IS NULL") == 0
    assert _count(db_engine, "SELECT count(*) FROM tickets WHERE body LIKE '%kestrel%'") == 0
    assert _count(db_engine, "SELECT count(*) FROM ticket_ratings WHERE comment IS NOT NULL") == 0
    assert _count(db_engine, "SELECT count(*) FROM inbound_emails") == 0
    assert _count(db_engine, "SELECT count(*) FROM ticket_attachments") == 0
    with db_engine.connect() as conn:
        event = conn.execute(sa.text("SELECT actor, counts::text AS counts FROM privacy_events")).one()
    assert event.actor == "cli" and "kestrel" not in event.counts and "@" not in event.counts


def test_cli_refuses_what_is_not_an_address(cli_env):
    result = run_cli("customer", "erase", "--email", "nobody", expect_success=False)
    assert result.exit_code == 2 and "e-mail address" in result.output


def test_api_export_holds_the_tickets_thread_attachment_and_raw_mail(inbound, client, anonymous_client):  # noqa: F811
    created = client.post("/api/tickets", json={"subject": "Lamp", "body": "My lamp flickers.", "email": ADDRESS})
    ticket_id = created.get_json()["ticket"]["id"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Try a new bulb."})
    raw = email_bytes(sender=ADDRESS, subject=f"Re: Lamp [T-{ticket_id}]", message_id="<c1@c.test>",
                      body="Photo attached.", attachments=[("lamp.png", "image/png", PHOTO)])
    anonymous_client.post("/api/inbound/email", data=raw, headers={"X-Signature": sign(SECRET, raw, int(time.time())),
                                                                   "Content-Type": "message/rfc822"})
    response = client.get(f"/api/customers/export?email={ADDRESS}")
    assert response.status_code == 200 and response.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.data))
    messages = json.loads(archive.read(f"tickets/{ticket_id}/messages.json"))
    assert [m["body"] for m in messages][:2] == ["My lamp flickers.", "Try a new bulb."]
    assert any(archive.read(n) == PHOTO for n in archive.namelist() if "/attachments/" in n)
    assert any(archive.read(n) == raw for n in archive.namelist() if n.startswith("raw_mail/"))
    other = client.get("/api/customers/export?email=someone.else@example.com")
    assert zipfile.ZipFile(io.BytesIO(other.data)).namelist() == ["mail_sent.json", "README.json"]
