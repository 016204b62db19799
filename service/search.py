"""Search use case: embed the query, fetch the exact top-k, attach snippets."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.orm import Session

from .embeddings import Embedder, embed_padded
from .ranking import RankingWeights
from .retrieval import search_by_vector
from .validation import clean_search_request

SNIPPET_CHARS = 240
_WORD = re.compile(r"[a-z0-9]+(?:['_-][a-z0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_STOP_WORDS = frozenset(
    "a an and are as at be but by can do does for from have how i if in is it my of on or so that the "
    "this to was what when where which who why will with you your me we our".split()
)


@dataclass(frozen=True)
class SearchResult:
    """A ranked article with its score breakdown."""

    id: int
    title: str
    category: str | None
    snippet: str
    similarity: float
    recency: float
    importance: float
    score: float
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        return data


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` minus common stop words."""
    return {word for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS}


def make_snippet(content: str, query: str, max_chars: int = SNIPPET_CHARS) -> str:
    """The sentence sharing most words with the query (plus what follows, up to ``max_chars``).

    Falls back to the start of the article when no sentence shares a word.
    """
    sentences = [s.strip(" #*-\t") for s in _SENTENCE_END.split(content) if s.strip(" #*-\t")]
    if not sentences:
        return ""
    wanted = content_words(query)
    overlaps = [len(wanted & content_words(sentence)) for sentence in sentences]
    best = max(range(len(sentences)), key=lambda i: (overlaps[i], -i)) if any(overlaps) else 0
    snippet = " ".join(sentences[best:])
    if len(snippet) <= max_chars:
        return snippet
    cut = snippet.rfind(" ", 0, max_chars - 1)
    return snippet[: cut if cut > 0 else max_chars - 1].rstrip(",;:") + "…"


def search_knowledge(session: Session, embedder: Embedder, query: str, *, limit: int = 3,
                     weights: RankingWeights = RankingWeights(), now: datetime | None = None,
                     source_prefix: str | None = None) -> list[SearchResult]:
    """Exact top-``limit`` articles for ``query`` under the product formula.

    ``source_prefix`` keeps only articles imported from files under that path.
    """
    query, limit = clean_search_request(query, limit)
    vector = embed_padded(embedder, [query])[0]
    rows = search_by_vector(session, vector, model=embedder.model_name, limit=limit, weights=weights,
                            now=now or datetime.now(timezone.utc), source_prefix=source_prefix)
    return [
        SearchResult(
            id=row.id, title=row.title, category=row.category, snippet=make_snippet(row.content, query),
            similarity=row.similarity, recency=row.recency, importance=row.importance, score=row.score,
            created_at=row.created_at,
        )
        for row in rows
    ]
