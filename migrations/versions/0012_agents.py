"""The agent's side: roles, ticket work state, one thread per ticket, transitions, drafts, the mail outbox.

Existing tickets get their thread back-filled (the question, and the AI's answer when there was one); a ticket
already escalated to an agent is opened.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _now() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def _id() -> sa.Column:
    return sa.Column("id", sa.BigInteger, sa.Identity(always=False), primary_key=True)


def _ticket_fk(nullable: bool = False, ondelete: str = "CASCADE") -> sa.Column:
    return sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete=ondelete), nullable=nullable)


def _user_fk(name: str) -> sa.Column:
    return sa.Column(name, sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="SET NULL"), nullable=True)


def _roles() -> None:
    for table in ("admin_users", "api_tokens"):
        op.add_column(table, sa.Column("role", sa.Text, nullable=False, server_default="admin"))
        op.create_check_constraint(f"{table}_role_valid", table, "role IN ('admin', 'agent')")


def _ticket_state() -> None:
    for name in ("opened_at", "due_at", "first_response_at"):
        op.add_column("tickets", sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    op.add_column("tickets", sa.Column("state", sa.Text, nullable=True))
    op.add_column("tickets", _user_fk("assignee_id"))
    op.add_column("tickets", sa.Column("solved_by", sa.Text, nullable=True))
    op.add_column("tickets", sa.Column("reply_token", sa.Text, nullable=True))
    op.create_check_constraint("tickets_state_valid", "tickets",
                               "state IS NULL OR state IN ('open', 'pending', 'solved')")
    op.create_index("tickets_queue", "tickets", ["state", "due_at"])
    op.create_index("tickets_reply_token", "tickets", ["reply_token"], unique=True)


def _tables() -> None:
    op.create_table(
        "ticket_messages", _id(), _ticket_fk(),
        sa.Column("kind", sa.Text, nullable=False), _user_fk("author_user_id"),
        sa.Column("channel", sa.Text, nullable=False), sa.Column("body", sa.Text, nullable=False),
        sa.Column("email_message_id", sa.Text, nullable=True), _now(),
        sa.Column("draft_body", sa.Text, nullable=True),
        sa.Column("draft_article_ids", ARRAY(sa.BigInteger), nullable=True),
        sa.Column("edit_ratio", sa.Double, nullable=True),
        sa.CheckConstraint("kind IN ('customer', 'ai_answer', 'agent_reply', 'internal_note')",
                           name="ticket_messages_kind_valid"),
        sa.CheckConstraint("channel IN ('web', 'email', 'api')", name="ticket_messages_channel_valid"),
        sa.CheckConstraint("edit_ratio IS NULL OR edit_ratio BETWEEN 0 AND 1",
                           name="ticket_messages_edit_ratio_range"),
    )
    op.create_index("ticket_messages_ticket", "ticket_messages", ["ticket_id", "id"])
    op.create_index("ticket_messages_email_message_id", "ticket_messages", ["email_message_id"], unique=True,
                    postgresql_where=sa.text("email_message_id IS NOT NULL"))
    op.create_table(
        "ticket_transitions", _id(), _ticket_fk(),
        sa.Column("from_state", sa.Text, nullable=True), sa.Column("to_state", sa.Text, nullable=True),
        sa.Column("event", sa.Text, nullable=False), sa.Column("actor", sa.Text, nullable=False),
        _user_fk("actor_user_id"), _now(),
    )
    op.create_index("ticket_transitions_ticket", "ticket_transitions", ["ticket_id", "id"])
    op.create_table(
        "ticket_drafts", _id(), _ticket_fk(), sa.Column("body", sa.Text, nullable=False),
        sa.Column("article_ids", ARRAY(sa.BigInteger), nullable=False), sa.Column("mode", sa.Text, nullable=False),
        sa.Column("instruction", sa.Text, nullable=True), _now(),
        sa.Column("used_by_message_id", sa.BigInteger, sa.ForeignKey("ticket_messages.id", ondelete="SET NULL"),
                  nullable=True),
    )
    op.create_index("ticket_drafts_ticket", "ticket_drafts", ["ticket_id", "id"])
    op.create_table(
        "mail_outbox", _id(), _ticket_fk(nullable=True, ondelete="SET NULL"),
        sa.Column("to_address", sa.Text, nullable=False), sa.Column("subject", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False), sa.Column("message_id", sa.Text, nullable=False),
        sa.Column("in_reply_to", sa.Text, nullable=True), sa.Column("references", sa.Text, nullable=True),
        sa.Column("reply_to", sa.Text, nullable=True), sa.Column("auto_submitted", sa.Text, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True), _now(),
    )
    op.create_index("mail_outbox_due", "mail_outbox", ["next_attempt_at"], postgresql_where=sa.text("sent_at IS NULL"))
    op.create_index("mail_outbox_message_id", "mail_outbox", ["message_id"], unique=True)
    op.create_table("canned_replies", _id(), sa.Column("title", sa.Text, nullable=False),
                    sa.Column("body", sa.Text, nullable=False), _now())
    op.create_index("canned_replies_title", "canned_replies", ["title"], unique=True)


BACKFILL = """
INSERT INTO ticket_messages (ticket_id, kind, channel, body, created_at)
SELECT id, 'customer', 'api', body, created_at FROM tickets;
INSERT INTO ticket_messages (ticket_id, kind, channel, body, created_at)
SELECT DISTINCT ON (a.ticket_id) a.ticket_id, 'ai_answer', 'web', a.answer, a.created_at
FROM ticket_answers a JOIN tickets t ON t.id = a.ticket_id
WHERE t.status = 'answered' ORDER BY a.ticket_id, a.id DESC;
UPDATE tickets SET state = 'open', opened_at = escalated_at, due_at = escalated_at + interval '8 hours'
WHERE escalated_at IS NOT NULL AND customer_email IS NOT NULL;
UPDATE tickets SET state = 'solved', solved_by = 'customer' WHERE resolved_at IS NOT NULL AND state IS NULL;
"""


def upgrade() -> None:
    _roles()
    _ticket_state()
    _tables()
    for statement in BACKFILL.split(";"):
        if statement.strip():
            op.execute(statement)


def downgrade() -> None:
    for table in ("canned_replies", "mail_outbox", "ticket_drafts", "ticket_transitions", "ticket_messages"):
        op.drop_table(table)
    op.drop_index("tickets_reply_token", table_name="tickets")
    op.drop_index("tickets_queue", table_name="tickets")
    op.drop_constraint("tickets_state_valid", "tickets", type_="check")
    for name in ("reply_token", "solved_by", "assignee_id", "state", "first_response_at", "due_at", "opened_at"):
        op.drop_column("tickets", name)
    for table in ("admin_users", "api_tokens"):
        op.drop_constraint(f"{table}_role_valid", table, type_="check")
        op.drop_column(table, "role")
