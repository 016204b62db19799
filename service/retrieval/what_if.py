"""What-if ranking for an importance proposal: the preview's ranking for a question, with one article's
importance changed. Exact for the same reason the admin slider is (service/retrieval/preview.py): importance
enters only the recency term."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session

from service.retrieval.preview import Preview, preview_ranking
from service.retrieval.ranking import RankingWeights, final_score
from service.runtime import Runtime

WHAT_IF_LIMIT = 5
WHAT_IF_QUESTIONS = 3


@dataclass(frozen=True)
class WhatIf:
    """An article's place for one question now and at another importance (None: not known, see ``note``)."""

    question: str
    rank_now: int | None
    rank_then: int | None
    score_now: float | None
    score_then: float | None
    ranking_then: list[dict[str, Any]]  # the top results at the new importance: id, title, score
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def rank_with_importance(preview: Preview, article_id: int, importance: float) -> WhatIf:
    """Re-rank ``preview``'s results with the article at ``importance``. Pure."""
    weights = RankingWeights(**preview.weights)
    article = preview.article
    if article is None or article.get("relevance") is None:
        return WhatIf(preview.query, None, None, None, None, [],
                      (article or {}).get("note", "the article is not among the results"))
    score_then = final_score(article["relevance"], article["recency"], importance, weights)
    others = [r for r in preview.results if r["id"] != article_id]
    ranking = sorted([*({"id": r["id"], "title": r["title"], "score": r["score"]} for r in others),
                      {"id": article_id, "title": article["title"], "score": score_then}],
                     key=lambda r: -r["score"])[:preview.limit]
    rank_then = 1 + sum(1 for r in others if r["score"] > score_then)
    return WhatIf(preview.query, article.get("rank"), rank_then, article["score"], score_then, ranking,
                  article.get("note"))


def what_if_for_questions(session: Session, runtime: Runtime, article_id: int, importance: float,
                          questions: list[str]) -> list[WhatIf]:
    """The what-if for each of the first few questions (the ones that produced a proposal)."""
    return [rank_with_importance(preview_ranking(session, runtime, question, limit=WHAT_IF_LIMIT,
                                                 article_id=article_id), article_id, importance)
            for question in questions[:WHAT_IF_QUESTIONS] if question.strip()]
