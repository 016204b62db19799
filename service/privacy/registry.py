"""Where a customer's rows are: one entry per table (or per JSON field that quotes a ticket), read by erase.

Every predicate may use ``:email`` (the address, lower case), ``:ticket_ids`` (the customer's tickets, locked)
and ``:handoff`` (the hand-off message, service.tickets.answering).
A branch that adds a table holding customer data adds one line here (``rows_where`` for rows to delete,
``rows_set`` for text to blank in rows that feed counts, ``json_mentions`` for a JSON array on another row that
quotes the customer's tickets). Ticket rows are kept, anonymised (the last line), so counts stay.
"""

from __future__ import annotations

from dataclasses import dataclass

OF_TICKETS = "ticket_id = ANY(:ticket_ids)"
# An address inside a text column, however it is written ("Ann <ann@example.com>", any case).
MENTIONS_ADDRESS = "position(:email in lower(coalesce({column}, ''))) > 0"
# Agents' notifications carry no ticket_id (service.mail.outbox.enqueue_notification) but quote the ticket, whose
# reference opens their subject: "[T-42] Customer replied: …".
NOTIFICATION_OF_TICKETS = "(ticket_id IS NULL AND substring(subject from '^\\[T-([0-9]{1,18})\\]')::bigint " \
                          "= ANY(:ticket_ids))"


# The mail worker batches a busy minute's notifications to one address into one e-mail (service.mail.outbox:
# "N notifications, the latest: …", parts joined by a line of dashes, each naming its ticket "T-n"): the parts about
# the customer's tickets go, the others stay; a batch left empty goes.
BATCH_SEPARATOR = "E'\\n\\n' || repeat('-', 40) || E'\\n\\n'"
NAMES_TICKETS = "(cardinality(:ticket_ids) > 0 AND {text} ~ ('T-(' || array_to_string(:ticket_ids, '|') || ')\\M'))"
BATCH_OF_TICKETS = "(ticket_id IS NULL AND reply_to IS NULL AND {mentions})".format(
    mentions=NAMES_TICKETS.format(text="body"))
KEPT_PARTS = (f"ARRAY(SELECT part FROM unnest(string_to_array(body, {BATCH_SEPARATOR})) AS part "
              f"WHERE NOT {NAMES_TICKETS.format(text='part')})")
EMPTIED_BATCH = "(ticket_id IS NULL AND reply_to IS NULL AND body = '' AND subject = '0 notifications')"
WIDGET_CONVERSATIONS = "SELECT id FROM widget_conversations WHERE lower(email) = :email OR ticket_id = ANY(:ticket_ids)"


@dataclass(frozen=True)
class ErasureTarget:
    """One kind of row to erase: a count statement and the statement that erases the same rows."""

    name: str
    count_sql: str
    erase_sql: str


def rows_where(name: str, table: str, predicate: str) -> ErasureTarget:
    """Rows of ``table`` matching ``predicate`` are deleted (``table`` is a constant, never input)."""
    return ErasureTarget(name, f"SELECT count(*) FROM {table} WHERE {predicate}",
                         f"DELETE FROM {table} WHERE {predicate}")


def rows_set(name: str, table: str, assignments: str, predicate: str) -> ErasureTarget:
    """Rows of ``table`` matching ``predicate`` keep their counts and labels; ``assignments`` blanks their text."""
    return ErasureTarget(name, f"SELECT count(*) FROM {table} WHERE {predicate}",
                         f"UPDATE {table} SET {assignments} WHERE {predicate}")


def json_mentions(name: str, table: str, column: str, path: str | None = None) -> ErasureTarget:
    """Elements ``{"ticket_id": n, …}`` of the customer's tickets are removed from a JSON array on other rows
    (``path``: the array's key inside ``column``, else ``column`` is the array)."""
    array = f"{column} -> '{path}'" if path else column
    match = f"jsonb_typeof({array}) = 'array' AND EXISTS (SELECT 1 FROM jsonb_array_elements({array}) e " \
            f"WHERE (e ->> 'ticket_id')::bigint = ANY(:ticket_ids))"
    kept = f"(SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb) " \
           f"FROM jsonb_array_elements({array}) WITH ORDINALITY AS k(e, n) " \
           f"WHERE coalesce((e ->> 'ticket_id')::bigint <> ALL(:ticket_ids), true))"
    value = f"jsonb_set({column}, '{{{path}}}', {kept})" if path else kept
    return ErasureTarget(name, f"SELECT count(*) FROM {table} WHERE {match}",
                         f"UPDATE {table} SET {column} = {value} WHERE {match}")


ERASED = "'(erased)'"
# Aggregates stay: a ticket keeps its row, states, times, gate decision (numbers and labels, no text), citations,
# transitions and the good/bad of its rating, so every count and chart is unchanged; its text goes. Rows that are
# nothing but personal data (files, raw mail, outbox, drafts, vectors, candidates) are deleted.
TARGETS: list[ErasureTarget] = [
    rows_where("attachments", "ticket_attachments",
               "message_id IN (SELECT id FROM ticket_messages WHERE ticket_id = ANY(:ticket_ids))"),
    rows_set("messages", "ticket_messages", f"body = {ERASED}, draft_body = NULL, email_message_id = NULL",
             OF_TICKETS),
    # The hand-off message is the service's own text, and the dashboard tells hand-offs from answers by it.
    rows_set("answers", "ticket_answers",
             f"answer = CASE WHEN answer = :handoff THEN answer ELSE {ERASED} END, error = NULL", OF_TICKETS),
    rows_set("ratings", "ticket_ratings", "comment = NULL", OF_TICKETS),
    rows_set("feedback", "answer_feedback", "comment = NULL", OF_TICKETS),
    rows_where("composer_texts", "ticket_composer_texts", OF_TICKETS),
    rows_where("ai_drafts", "ticket_drafts", OF_TICKETS),
    rows_where("ticket_vectors", "ticket_vectors", OF_TICKETS),
    rows_where("raw_mail", "inbound_emails",
               f"ticket_id = ANY(:ticket_ids) OR related_ticket_id = ANY(:ticket_ids) OR "
               f"{MENTIONS_ADDRESS.format(column='sender')} OR position(convert_to(:email, 'UTF8') in raw) > 0"),
    rows_where("outbox", "mail_outbox", f"{OF_TICKETS} OR {MENTIONS_ADDRESS.format(column='to_address')} OR "
               f"{NOTIFICATION_OF_TICKETS}"),
    rows_set("notification_batches", "mail_outbox",
             f"body = array_to_string({KEPT_PARTS}, {BATCH_SEPARATOR}), "
             f"subject = cardinality({KEPT_PARTS}) || ' notifications'", BATCH_OF_TICKETS),
    rows_where("emptied_batches", "mail_outbox", EMPTIED_BATCH),
    rows_where("candidates", "article_candidates", OF_TICKETS),
    json_mentions("candidate_mentions", "article_candidates", "also_asked"),
    json_mentions("proposal_mentions", "importance_proposals", "evidence", "questions"),
    # The chat widget (service.widget): a conversation is the visitor's own words, kept by address or by the ticket
    # its hand-off made; its messages go with it (the widget's helpful/unhelpful marks are not labels of a ticket).
    rows_where("widget_messages", "widget_messages", f"conversation_id IN ({WIDGET_CONVERSATIONS})"),
    rows_where("widget_conversations", "widget_conversations", f"id IN ({WIDGET_CONVERSATIONS})"),
    rows_set("tickets", "tickets", f"subject = {ERASED}, body = {ERASED}, customer_email = NULL, "
             "secret_sha256 = NULL, reply_token = NULL, erased_at = clock_timestamp()", "id = ANY(:ticket_ids)"),
]


def register(target: ErasureTarget) -> None:
    """Add a table before the tickets' own line (for tables added by other packages)."""
    TARGETS.insert(len(TARGETS) - 1, target)
