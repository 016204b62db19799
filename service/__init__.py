"""Support-ticket answering service on PostgreSQL + pgvector: the public Python API.

The names below load on first use (PEP 562), so ``import service.retrieval.precision`` and the other core
modules never pay for Flask, the database layer or the embedder unless they use them (issue 28 item 5).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.public import add_knowledge_article, answer_ticket, initialize_knowledge_base, search_articles
    from service.web.app import create_app

__all__ = ["create_app", "add_knowledge_article", "search_articles", "initialize_knowledge_base", "answer_ticket"]

# Public name → the module that defines it, imported when the name is first read.
_LAZY = {
    "create_app": "service.web.app",
    "add_knowledge_article": "service.public",
    "search_articles": "service.public",
    "initialize_knowledge_base": "service.public",
    "answer_ticket": "service.public",
}


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first access and cache the name on the package."""
    if name not in _LAZY:
        raise AttributeError(f"module 'service' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not."""
    return sorted([*globals(), *_LAZY])
