"""The team's verdicts remembered: a question close to one a reviewer judged, answered from the same article, takes
that verdict. A customer who asks what a reviewer marked wrong last week is handed to a person, not given the same
wrong answer; one who asks what a reviewer marked right gets it even where the calibrator alone is unsure.

Support questions recur: in the dev sets' held-out protocol most wrong answers the features cannot tell from right
ones are rephrasings of a few questions the knowledge base does not answer, each near an article that does not
answer them either (docs/answer-gate.md, "Reviewed neighbours"). Calibration judges the rule the same way it runs:
each reviewed ticket's verdict comes from the *other* reviews (leave one out), so the threshold's precision bound
counts what the rule really does.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Hashable, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.providers.embeddings import Embedder, EmbeddingError, embed_narrow

log = logging.getLogger(__name__)

OFF = 2.0  # a REVIEW_MATCH_SIMILARITY no cosine reaches: the rule never decides
VETO_SCORE = -1.0  # a reviewed-wrong neighbour: below every threshold
ANSWER_SCORE = 2.0  # a reviewed-right neighbour: above every threshold


@dataclass(frozen=True)
class ReviewMatch:
    """The nearest reviewed ticket whose AI answer came from the same article."""

    ticket_id: int
    similarity: float
    answer_correct: bool

    def to_dict(self) -> dict:
        """JSON form stored with the ticket's gate."""
        return asdict(self) | {"similarity": round(self.similarity, 4)}


def _match_sql(width: int) -> sa.TextClause:
    return sa.text(f"""
        SELECT r.ticket_id, r.answer_correct,
               1 - (v.embedding <=> CAST(:query AS halfvec({int(width)}))) AS similarity
        FROM gate_reviews r
        JOIN ticket_vectors v ON v.ticket_id = r.ticket_id AND v.embedding_model = :model
                              AND vector_dims(v.embedding) = {int(width)}
        JOIN ticket_citations c ON c.ticket_id = r.ticket_id AND c.rank = 1
        JOIN knowledge_base a ON a.id = c.article_id
        LEFT JOIN article_versions av ON av.article_id = c.article_id AND av.number = c.article_version
        WHERE c.article_id = :article_id
          -- a verdict is about the text the reviewer saw: an edit of the title or content retires it
          AND (av.article_id IS NULL OR (av.title = a.title AND av.content = a.content))
        ORDER BY v.embedding <=> CAST(:query AS halfvec({int(width)})), r.ticket_id
        LIMIT 1""")


HAS_REVIEWS_SQL = sa.text("SELECT EXISTS (SELECT 1 FROM gate_reviews)")


def find_review_match(session: Session, embedder: Embedder, query: str, article_id: int, *,
                      min_similarity: float) -> ReviewMatch | None:
    """The nearest reviewed question answered from ``article_id`` whose cosine reaches ``min_similarity``; None
    without one, with no reviews at all (nothing is embedded then), or when the embedder fails."""
    if min_similarity > 1.0 or not session.scalar(HAS_REVIEWS_SQL):
        return None
    try:
        vector = embed_narrow(embedder, [query])[0]
    except EmbeddingError as exc:
        log.warning("question not embedded for the reviewed neighbours: %s", exc)
        return None
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        return None
    row = session.execute(_match_sql(len(vector)), {
        "query": np.asarray(vector / norm, dtype=np.float32), "model": embedder.model_name,
        "article_id": article_id}).first()
    if row is None or row.similarity < min_similarity:
        return None
    return ReviewMatch(int(row.ticket_id), float(row.similarity), bool(row.answer_correct))


def effective_score(confidence: float, verdict: bool | None) -> float:
    """What the threshold is compared with: the neighbour's verdict when there is one, else the confidence."""
    if verdict is None:
        return confidence
    return ANSWER_SCORE if verdict else VETO_SCORE


@dataclass(frozen=True)
class ReviewedQuestion:
    """A reviewed ticket as the leave-one-out rule sees it."""

    ticket_id: int
    vector: np.ndarray | None  # unit length; None when the question was never embedded
    article_id: Hashable | None  # its rank-1 article as reviewed (id and text; a document id in `supportrag eval`)
    correct: bool


def leave_one_out_verdicts(reviewed: Sequence[ReviewedQuestion], min_similarity: float) -> list[bool | None]:
    """For each reviewed ticket, the verdict of its nearest *other* reviewed ticket with the same rank-1 article, if
    that one's cosine reaches ``min_similarity`` (what the rule would have done had it been asked after them)."""
    verdicts: list[bool | None] = [None] * len(reviewed)
    if min_similarity > 1.0:
        return verdicts
    by_article: dict[Hashable, list[int]] = {}
    for index, item in enumerate(reviewed):
        if item.vector is not None and item.article_id is not None:
            by_article.setdefault(item.article_id, []).append(index)
    for members in by_article.values():
        if len(members) < 2:
            continue
        vectors = np.vstack([reviewed[i].vector for i in members]).astype(np.float32)
        similarity = vectors @ vectors.T
        np.fill_diagonal(similarity, -np.inf)
        for row, index in enumerate(members):
            best = int(np.argmax(similarity[row]))
            if similarity[row, best] >= min_similarity:
                verdicts[index] = reviewed[members[best]].correct
    return verdicts


def nearest_verdict(reviewed: Sequence[ReviewedQuestion], vector: np.ndarray | None, article_id: Hashable | None,
                    min_similarity: float) -> bool | None:
    """The verdict a new question takes from the reviewed ones (``find_review_match`` without the database)."""
    if vector is None or article_id is None or min_similarity > 1.0:
        return None
    same = [item for item in reviewed if item.article_id == article_id and item.vector is not None]
    if not same:
        return None
    similarity = np.vstack([item.vector for item in same]) @ (vector / np.linalg.norm(vector))
    best = int(np.argmax(similarity))
    return same[best].correct if similarity[best] >= min_similarity else None
