"""The agents' team work (issue 25, items 4-6): tags, who read what, who is on a ticket now, CSAT, ticket search.

- ``ticket_tags``: a ticket's labels, one row each (filtered with ``?tag=``).
- ``ticket_reads``: the newest thread message each agent had when they last opened each ticket; a customer message
  after it marks the ticket unread for its assignee (ids, not clocks: a transaction's now() is its start).
- ``ticket_presence``: "Agnes is viewing / replying": a heartbeat row per agent and ticket that expires.
- ``ticket_ratings``: the customer's "How did we do?" (one per ticket, a second replaces the first), with the
  agent who solved it, for CSAT by agent and AI-only vs agent-solved.
- ``tickets.search_vector`` / ``ticket_messages.search_vector``: generated tsvectors (PostgreSQL 'english'),
  GIN-indexed, for full-text search over subject and thread; ``tickets_customer_email`` for the customer history.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

SUBJECT_VECTOR = "to_tsvector('english'::regconfig, coalesce(subject, ''))"
BODY_VECTOR = "to_tsvector('english'::regconfig, coalesce(body, ''))"


def _ticket_fk() -> sa.Column:
    return sa.Column("ticket_id", sa.BigInteger, sa.ForeignKey("tickets.id", ondelete="CASCADE"), primary_key=True)


def _user_fk() -> sa.Column:
    return sa.Column("user_id", sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="CASCADE"), primary_key=True)


def _now(name: str) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    op.create_table("ticket_tags", _ticket_fk(), sa.Column("tag", sa.Text, primary_key=True), _now("created_at"),
                    sa.CheckConstraint("tag ~ '^[a-z0-9][a-z0-9_-]{0,39}$'", name="ticket_tags_tag_valid"))
    op.create_index("ticket_tags_tag", "ticket_tags", ["tag"])
    op.create_table("ticket_reads", _ticket_fk(), _user_fk(),
                    sa.Column("last_message_id", sa.BigInteger, nullable=False), _now("read_at"))
    op.create_table("ticket_presence", _ticket_fk(), _user_fk(),
                    sa.Column("activity", sa.Text, nullable=False),
                    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False), _now("updated_at"),
                    sa.CheckConstraint("activity IN ('viewing', 'replying')", name="ticket_presence_activity_valid"))
    op.create_table(
        "ticket_ratings", _ticket_fk(),
        sa.Column("good", sa.Boolean, nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("solved_by", sa.Text, nullable=True),
        sa.Column("agent_id", sa.BigInteger, sa.ForeignKey("admin_users.id", ondelete="SET NULL"), nullable=True),
        _now("created_at"), _now("updated_at"),
    )
    op.add_column("tickets", sa.Column("search_vector", TSVECTOR, sa.Computed(SUBJECT_VECTOR, persisted=True)))
    op.add_column("ticket_messages", sa.Column("search_vector", TSVECTOR, sa.Computed(BODY_VECTOR, persisted=True)))
    op.create_index("tickets_search_vector", "tickets", ["search_vector"], postgresql_using="gin")
    op.create_index("ticket_messages_search_vector", "ticket_messages", ["search_vector"], postgresql_using="gin")
    op.create_index("tickets_customer_email", "tickets", ["customer_email"])
    op.create_index("tickets_assignee", "tickets", ["assignee_id", "state"])


def downgrade() -> None:
    for index, table in (("tickets_assignee", "tickets"), ("tickets_customer_email", "tickets"),
                         ("ticket_messages_search_vector", "ticket_messages"),
                         ("tickets_search_vector", "tickets")):
        op.drop_index(index, table_name=table)
    op.drop_column("ticket_messages", "search_vector")
    op.drop_column("tickets", "search_vector")
    for table in ("ticket_ratings", "ticket_presence", "ticket_reads", "ticket_tags"):
        op.drop_table(table)
