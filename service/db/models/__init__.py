"""Tables, declared once by aggregate; migrations/ creates the same schema (a test compares them).

Import from here (``from service.db.models import Article``); the submodules split the tables by aggregate:
``base`` (declarative base, column types, app state), ``knowledge``, ``tickets``, ``accounts``.
"""

from service.db.models.accounts import TOKEN_NAME_MAX, USERNAME_MAX, AdminUser, ApiToken, RateLimitCounter
from service.db.models.base import AppState, Base, BinaryVector, length_between
from service.db.models.knowledge import (
    CATEGORY_MAX,
    CONTENT_MAX,
    IMPORTANCE_MAX,
    IMPORTANCE_MIN,
    SECTION_KINDS,
    TITLE_MAX,
    Article,
    ArticleSection,
    SynonymGroup,
)
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
    "ANSWER_MODES", "CATEGORY_MAX", "CONTENT_MAX", "ESCALATION_REASONS", "IMPORTANCE_MAX", "IMPORTANCE_MIN",
    "SECTION_KINDS", "TICKET_STATUSES", "TITLE_MAX", "TOKEN_NAME_MAX", "USERNAME_MAX",
    "AdminUser", "AnswerFeedback", "ApiToken", "AppState", "Article", "ArticleSection", "Base", "BinaryVector",
    "RateLimitCounter", "SynonymGroup", "Ticket", "TicketAnswer", "TicketCitation",
    "length_between",
]
