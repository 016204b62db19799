"""How close each article is to an importance proposal: its outcomes in the window against the minimum (issue 37).

A proposal needs ``IMPORTANCE_MIN_OUTCOMES`` outcomes in ``IMPORTANCE_WINDOW_DAYS``; until then nothing showed an
article's count. This reads the same counts as ``refresh_proposals`` (service.knowledge.importance), so the page's
numbers are the rule's own. A use case: takes a session, never commits.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.models import Article
from service.knowledge.importance import outcome_counts


@dataclass(frozen=True)
class ArticleProgress:
    """One article's outcomes in the window, and how many a proposal needs."""

    article_id: int
    title: str
    outcomes: int
    needed: int

    @property
    def missing(self) -> int:
        """Outcomes still to come before the rule looks at the article (0: it is counted)."""
        return max(self.needed - self.outcomes, 0)


def proposal_progress(session: Session, settings: Settings) -> list[ArticleProgress]:
    """Every article with at least one outcome in the window, closest to a proposal first."""
    counts, _questions = outcome_counts(session, settings.importance_window_days)
    titles = dict(session.execute(sa.select(Article.id, Article.title).where(Article.id.in_(list(counts)))).all())
    rows = [ArticleProgress(article_id, titles[article_id], count.total, settings.importance_min_outcomes)
            for article_id, count in counts.items() if article_id in titles and count.total > 0]
    return sorted(rows, key=lambda row: (row.missing, -row.outcomes, row.title))
