"""Support-ticket answering service on PostgreSQL + pgvector."""

from service.public import add_knowledge_article, answer_ticket, initialize_knowledge_base, search_articles
from service.web.app import create_app

__all__ = ["create_app", "add_knowledge_article", "search_articles", "initialize_knowledge_base", "answer_ticket"]
