"""The top-level Python API: works on the configured database with no setup call."""

from __future__ import annotations

from service.knowledge.articles import StoredArticle, add_article
from service.knowledge.versions import ChangeContext
from service.retrieval.search import SearchResult, run_search
from service.runtime import default_runtime
from service.tickets.queries import get_ticket
from service.tickets.secrets import new_ticket_secret
from service.tickets.workflow import answer_ticket as answer


def add_knowledge_article(title: str, content: str, category: str | None = None,
                          importance: float = 1.0) -> StoredArticle:
    """Store and embed an article; if embedding fails it is stored as pending (never lost)."""
    runtime = default_runtime()
    with runtime.session() as session:
        return add_article(session, runtime.embedder, {
            "title": title, "content": content, "category": category, "importance": importance,
        }, change=ChangeContext("python", "python"))


def search_articles(query: str, limit: int = 3) -> list[SearchResult]:
    """Exact top-``limit`` articles by ``similarity×0.8 + recency×0.2×importance`` (the default vector mode; hybrid
    puts a fused relevance in the similarity's place: docs/retrieval-quality.md)."""
    runtime = default_runtime()
    with runtime.session() as session:
        return run_search(session, runtime.embedder, query, limit=limit, weights=runtime.weights,
                          retrieval=runtime.retrieval).results


def initialize_knowledge_base() -> int:
    """Seed the five default articles once per database; returns how many were inserted."""
    return default_runtime().seed()


def answer_ticket(subject: str, body: str, email: str | None = None) -> dict:
    """Store a ticket, answer it (LLM, or extractive offline) and return it with citations.

    The dict's ``secret`` is the submitter's proof for feedback; it is not stored in clear.
    """
    runtime = default_runtime()
    fields = {"subject": subject, "body": body}
    if email is not None:
        fields["email"] = email
    secret, digest = new_ticket_secret()
    ticket_id = answer(runtime, runtime.chat, fields, secret_sha256=digest)
    with runtime.session() as session:
        return get_ticket(session, ticket_id).to_dict() | {"secret": secret}
