"""Export one customer: a ZIP of their tickets with messages, ratings and feedback, attachments as files, their
raw inbound mail, the mail sent to them, and README.json describing each file."""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from service.privacy.erase import normalise_email

# Columns never exported: vectors, full-text indexes, secrets, bytes written out as files instead.
HIDDEN = "- 'search_vector' - 'secret_sha256' - 'reply_token' - 'gate'"
TICKETS_SQL = f"SELECT to_jsonb(t) {HIDDEN} FROM tickets t WHERE lower(customer_email) = :email ORDER BY id"
# (file name inside tickets/<id>/, description, SQL of that ticket's rows as JSON)
PER_TICKET = [
    ("messages.json", "the thread: your messages and our replies (internal notes excluded)",
     "SELECT to_jsonb(m) - 'search_vector' - 'draft_body' - 'draft_article_ids' - 'edit_ratio' FROM ticket_messages m "
     "WHERE ticket_id = :ticket_id AND kind <> 'note' ORDER BY id"),
    ("answers.json", "the automatic answers given", "SELECT to_jsonb(a) FROM ticket_answers a "
     "WHERE ticket_id = :ticket_id ORDER BY id"),
    ("citations.json", "the articles (and their version) the answers quoted",
     "SELECT jsonb_build_object('article_id', article_id, 'article_title', article_title, 'article_version', "
     "article_version, 'cited', cited) FROM ticket_citations WHERE ticket_id = :ticket_id ORDER BY rank"),
    ("ratings.json", "your rating of the ticket", "SELECT to_jsonb(r) - 'agent_id' FROM ticket_ratings r "
     "WHERE ticket_id = :ticket_id"),
    ("feedback.json", "your feedback on the answer", "SELECT to_jsonb(f) FROM answer_feedback f "
     "WHERE ticket_id = :ticket_id ORDER BY id"),
]
ATTACHMENTS_SQL = sa.text("""
SELECT a.id, a.filename, a.content_type, a.content FROM ticket_attachments a
JOIN ticket_messages m ON m.id = a.message_id
WHERE m.ticket_id = :ticket_id AND m.kind <> 'note' ORDER BY a.id
""")
RAW_MAIL_SQL = sa.text("""
SELECT id, raw FROM inbound_emails
WHERE ticket_id = ANY(:ticket_ids) OR position(:email in lower(coalesce(sender, ''))) > 0 ORDER BY id
""").bindparams(sa.bindparam("ticket_ids", type_=ARRAY(sa.BigInteger)))
OUTBOX_SQL = sa.text("""
SELECT jsonb_build_object('id', id, 'ticket_id', ticket_id, 'to', to_address, 'subject', subject, 'body', body,
                          'created_at', created_at)
FROM mail_outbox WHERE position(:email in lower(to_address)) > 0 ORDER BY id
""")


@dataclass(frozen=True)
class CustomerExport:
    """The archive's bytes and how many tickets it holds."""

    data: bytes
    tickets: int


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _safe_name(name: str) -> str:
    """A file name without folders or control characters."""
    cleaned = "".join(c if c.isprintable() and c not in "/\\" else "_" for c in name).strip(". ")
    return cleaned[:120] or "file"


def export_customer(session: Session, email: str) -> CustomerExport:
    """Everything stored about ``email``, as a ZIP (read in one snapshot by the caller's transaction)."""
    address = normalise_email(email)
    readme: dict[str, str] = {}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        def put(path: str, data: str | bytes, description: str) -> None:
            archive.writestr(path, data)
            readme[path] = description

        tickets = list(session.execute(sa.text(TICKETS_SQL), {"email": address}).scalars())
        for ticket in tickets:
            folder = f"tickets/{ticket['id']}"
            put(f"{folder}/ticket.json", _json(ticket), "the ticket: subject, question, status and dates")
            for name, description, sql in PER_TICKET:
                rows = list(session.execute(sa.text(sql), {"ticket_id": ticket["id"]}).scalars())
                put(f"{folder}/{name}", _json(rows), description)
            for row in session.execute(ATTACHMENTS_SQL, {"ticket_id": ticket["id"]}):
                put(f"{folder}/attachments/{row.id}-{_safe_name(row.filename)}", bytes(row.content),
                    f"an attachment ({row.content_type})")
        ids = [ticket["id"] for ticket in tickets]
        for row in session.execute(RAW_MAIL_SQL, {"ticket_ids": ids, "email": address}):
            put(f"raw_mail/{row.id}.eml", bytes(row.raw), "an e-mail as we received it")
        outbox = list(session.execute(OUTBOX_SQL, {"email": address}).scalars())
        put("mail_sent.json", _json(outbox), "the e-mails we sent (or tried to send) to you")
        archive.writestr("README.json", _json({
            "customer": address, "generated_at": datetime.now(timezone.utc).isoformat(),
            "files": {"README.json": "this file", **readme}}))
    return CustomerExport(buffer.getvalue(), len(tickets))
