"""Tables, declared once by aggregate; migrations/ creates the same schema (a test compares them).

Import from here (``from service.db.models import Article``); the submodules split the tables by aggregate:
``base`` (declarative base, column types, app state), ``knowledge``, ``bm25`` (its statistics), ``tickets``,
``accounts``, ``agents`` (thread, transitions, drafts, outbox, canned replies), ``learning`` (candidates, importance
proposals and the importance audit log), ``search_vectors`` (what the exact scan reads, kept by triggers), ``ticket_vectors`` (ticket questions),
``inbound`` (received e-mail, stored before it is parsed); ``intake`` (the IMAP poller's place in each folder); ``team`` (tags, reads, presence, ratings); ``gate`` (answer reviews, gate calibrations); ``privacy`` (article versions, the privacy log).
"""

from service.db.models.accounts import (
    ROLES,
    TOKEN_NAME_MAX,
    USERNAME_MAX,
    AdminSession,
    AdminUser,
    ApiToken,
    LoginThrottle,
    RateLimitCounter,
)
from service.db.models.agents import (
    CHANNELS,
    DRAFT_REPLACED_AT,
    MESSAGE_KINDS,
    WORK_STATES,
    CannedReply,
    MailOutbox,
    TicketAttachment,
    TicketDraft,
    TicketMessage,
    TicketTransition,
)
from service.db.models.base import AppState, Base, BinaryVector, length_between
from service.db.models.bm25 import Bm25Term, Bm25Totals
from service.db.models.composer import ComposerText
from service.db.models.gate import GATE_SOURCES, GateCalibration, GateReview
from service.db.models.idempotency import ReplyIdempotencyKey
from service.db.models.inbound import INBOUND_STATUSES, InboundEmail
from service.db.models.intake import ImapFolder
from service.db.models.knowledge import (
    CATEGORY_MAX,
    CONTENT_MAX,
    IMPORTANCE_DECIMALS,
    IMPORTANCE_MAX,
    IMPORTANCE_MIN,
    SECTION_KINDS,
    TITLE_MAX,
    Article,
    ArticleSection,
    SynonymGroup,
)
from service.db.models.learning import (
    CANDIDATE_ACTIONS,
    CANDIDATE_SOURCES,
    CANDIDATE_STATUSES,
    IMPORTANCE_CHANGE_REASONS,
    PROPOSAL_STATUSES,
    ArticleCandidate,
    ImportanceChange,
    ImportanceProposal,
)
from service.db.models.privacy import PRIVACY_EVENT_KINDS, ArticleDraft, ArticleTrash, ArticleVersion, PrivacyEvent
from service.db.models.search_vectors import search_vectors
from service.db.models.team import PRESENCE_ACTIVITIES, TAG_PATTERN, TicketPresence, TicketRating, TicketRead, TicketTag
from service.db.models.ticket_vectors import ticket_vectors
from service.db.models.widget import WIDGET_ROLES, WidgetConversation, WidgetMessage
from service.db.models.tickets import (
    ANSWER_MODES,
    ESCALATION_REASONS,
    TICKET_STATUSES,
    AnswerFeedback,
    Ticket,
    TicketAnswer,
    TicketCitation,
)

__all__ = [
    "ANSWER_MODES", "CHANNELS", "DRAFT_REPLACED_AT", "MESSAGE_KINDS", "ROLES", "WORK_STATES",
    "CannedReply", "MailOutbox", "TicketAttachment", "TicketDraft", "TicketMessage", "TicketTransition",
    "CATEGORY_MAX", "CONTENT_MAX", "ESCALATION_REASONS", "IMPORTANCE_DECIMALS", "IMPORTANCE_MAX", "IMPORTANCE_MIN",
    "CANDIDATE_ACTIONS", "CANDIDATE_SOURCES", "CANDIDATE_STATUSES", "IMPORTANCE_CHANGE_REASONS", "PROPOSAL_STATUSES",
    "ArticleCandidate", "ImportanceChange", "ImportanceProposal",
    "SECTION_KINDS", "TICKET_STATUSES", "TITLE_MAX", "TOKEN_NAME_MAX", "USERNAME_MAX",
    "AdminSession", "AdminUser", "AnswerFeedback", "ApiToken", "AppState", "Article", "ArticleSection", "Base", "BinaryVector",
    "Bm25Term", "Bm25Totals", "ComposerText", "ReplyIdempotencyKey", "INBOUND_STATUSES", "ImapFolder", "InboundEmail",
    "LoginThrottle", "RateLimitCounter", "SynonymGroup", "Ticket", "TicketAnswer", "TicketCitation",
    "length_between", "search_vectors", "ticket_vectors",
    "PRIVACY_EVENT_KINDS", "ArticleDraft", "ArticleTrash", "ArticleVersion", "PrivacyEvent",
    "PRESENCE_ACTIVITIES", "TAG_PATTERN", "TicketPresence", "TicketRating", "TicketRead", "TicketTag",
    "GATE_SOURCES", "GateCalibration", "GateReview",
    "WIDGET_ROLES", "WidgetConversation", "WidgetMessage",
]
