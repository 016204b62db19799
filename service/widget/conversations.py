"""A visitor's conversation: start or resume it (rotating its token), its messages, the transcript, agent replies.

Use cases take a session and never commit; the widget's views commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import Ticket, TicketMessage, WidgetConversation, WidgetMessage
from service.widget.identity import Visitor
from service.widget.tokens import VisitorToken

HISTORY_LIMIT = 50  # messages a resumed conversation shows


class ConversationNotFound(LookupError):
    """No conversation for this token (or the token is an older generation: a replay)."""


@dataclass(frozen=True)
class ChatMessage:
    """One message as the widget shows it: ``role`` is visitor, assistant or agent."""

    id: str
    role: str
    body: str
    citations: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"id": self.id, "role": self.role, "body": self.body, "citations": self.citations or []}


def start_conversation(session: Session, visitor: Visitor, locale: str) -> WidgetConversation:
    """A verified user continues their latest conversation (on any device); anyone else starts a new one."""
    conversation = None
    if visitor.verified:
        conversation = session.scalar(sa.select(WidgetConversation).where(
            WidgetConversation.user_id == visitor.user_id).order_by(WidgetConversation.id.desc()).limit(1)
            .with_for_update())
    if conversation is None:
        conversation = WidgetConversation(user_id=visitor.user_id, locale=locale, token_generation=0)
        session.add(conversation)
    conversation.email = visitor.email or conversation.email
    conversation.name = visitor.name or conversation.name
    conversation.locale = locale
    conversation.token_generation += 1  # every earlier token of it stops working
    session.flush()
    return conversation


def find_conversation(session: Session, token: VisitorToken | None, *, lock: bool = False) -> WidgetConversation:
    """The conversation of a valid token of its current generation, else ConversationNotFound."""
    if token is None:
        raise ConversationNotFound()
    conversation = session.get(WidgetConversation, token.conversation_id, with_for_update=lock or None,
                               populate_existing=lock)
    if conversation is None or conversation.token_generation != token.generation:
        raise ConversationNotFound()
    return conversation


def resume_conversation(session: Session, token: VisitorToken | None) -> WidgetConversation:
    """After a reload: the same conversation under the next generation (the old token becomes a replay)."""
    conversation = find_conversation(session, token, lock=True)
    conversation.token_generation += 1
    session.flush()
    return conversation


def add_chat_message(session: Session, conversation_id: int, role: str, body: str, *,
                     citations: list[dict[str, Any]] | None = None, gate: dict[str, Any] | None = None) -> int:
    """Store a question or an answer; returns its id."""
    message = WidgetMessage(conversation_id=conversation_id, role=role, body=body, citations=citations, gate=gate)
    session.add(message)
    session.flush()
    return message.id


def earlier_questions(session: Session, conversation_id: int, limit: int = 2) -> list[str]:
    """The visitor's latest questions, oldest first: the context of a follow-up."""
    rows = session.scalars(sa.select(WidgetMessage.body).where(
        WidgetMessage.conversation_id == conversation_id, WidgetMessage.role == "visitor")
        .order_by(WidgetMessage.id.desc()).limit(limit)).all()
    return list(reversed(rows))


def chat_messages(session: Session, conversation: WidgetConversation) -> list[ChatMessage]:
    """The conversation so far, and the agent's replies on its ticket, in order."""
    rows = session.scalars(sa.select(WidgetMessage).where(WidgetMessage.conversation_id == conversation.id)
                           .order_by(WidgetMessage.id.desc()).limit(HISTORY_LIMIT)).all()
    messages = [ChatMessage(f"m{m.id}", m.role, m.body, m.citations) for m in reversed(rows)]
    return messages + agent_replies(session, conversation, after=0)


def agent_replies(session: Session, conversation: WidgetConversation, *, after: int) -> list[ChatMessage]:
    """Agents' public replies on the conversation's ticket with a thread id above ``after``."""
    if conversation.ticket_id is None:
        return []
    rows = session.scalars(sa.select(TicketMessage).where(
        TicketMessage.ticket_id == conversation.ticket_id, TicketMessage.kind == "agent_reply",
        TicketMessage.id > after).order_by(TicketMessage.id)).all()
    return [ChatMessage(f"a{m.id}", "agent", m.body) for m in rows]


def transcript(session: Session, conversation_id: int) -> str:
    """The conversation as plain text for the ticket: who said what, in order."""
    rows = session.execute(sa.select(WidgetMessage.role, WidgetMessage.body).where(
        WidgetMessage.conversation_id == conversation_id).order_by(WidgetMessage.id)).all()
    names = {"visitor": "Visitor", "assistant": "Assistant"}
    return "\n\n".join(f"{names[role]}: {body}" for role, body in rows)


def record_helpful(session: Session, conversation_id: int, message_id: int, helpful: bool) -> bool:
    """"Did this answer your question?" on one of this conversation's answers; False if it is not one."""
    message = session.get(WidgetMessage, message_id)
    if message is None or message.conversation_id != conversation_id or message.role != "assistant":
        return False
    message.helpful = helpful
    return True


def user_tickets(session: Session, user_id: str | None) -> list[dict[str, Any]]:
    """A verified user's tickets from the widget, newest first: reference, subject and where each stands."""
    if user_id is None:
        return []
    rows = session.execute(sa.select(Ticket.id, Ticket.subject, Ticket.state).join(
        WidgetConversation, WidgetConversation.ticket_id == Ticket.id).where(WidgetConversation.user_id == user_id)
        .order_by(Ticket.id.desc()).limit(20)).all()
    return [{"reference": f"T-{row.id}", "subject": row.subject, "state": row.state or "answered"} for row in rows]
