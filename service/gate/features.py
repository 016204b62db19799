"""Evidence features of one answer attempt (issue 34 item 1): pure, computed from the search outcome."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from service.retrieval.search import SearchResult
from service.retrieval.snippets import content_words

LEXICAL_DEPTH = 10  # how deep the lexical leg is read for the top article's rank
ABSENT_RANK = LEXICAL_DEPTH + 1  # the rank given to an article the lexical leg did not return


@dataclass(frozen=True)
class Features:
    """What the gate knows about an answer attempt; every field is documented in docs/answer-gate.md."""

    top_similarity: float  # the best cosine among the retrieved articles
    section_similarity: float  # the rank-1 article's best section's cosine
    margin: float  # the rank-1 article's cosine minus the next article's
    bm25_score: float  # the rank-1 article's BM25 score in the lexical leg (0 when it does not match)
    bm25_rank: int  # its rank there (ABSENT_RANK when absent)
    legs_agree: bool  # both legs put the same article first
    word_overlap: float  # share of the question's content words found in the cited section
    question_words: int  # the question's content words
    above_floor: int  # retrieved articles whose cosine reaches the floor
    heading_similarity: float  # the larger cosine of the question with the cited section's heading and the title

    def to_dict(self) -> dict:
        """JSON form stored with the ticket's gate."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Features":
        """Back from the stored JSON."""
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})

    def vector(self) -> list[float]:
        """The calibrator's inputs, in FEATURE_NAMES order (counts and scores on a log scale)."""
        return [self.top_similarity, self.section_similarity, self.margin, math.log1p(max(self.bm25_score, 0.0)),
                1.0 / self.bm25_rank, float(self.legs_agree), self.word_overlap,
                math.log1p(self.question_words), float(self.above_floor), self.heading_similarity]


FEATURE_NAMES = ("top_similarity", "section_similarity", "margin", "log_bm25_score", "inverse_bm25_rank",
                 "legs_agree", "word_overlap", "log_question_words", "above_floor",
                 "heading_similarity")


def cited_heading(result: SearchResult) -> str:
    """What the cited section is called: its own heading, else the article's title (an FAQ entry's question)."""
    return result.section_path[-1] if result.section_path else result.title


def compute_features(query: str, results: Sequence[SearchResult], lexical: Sequence[tuple[int, float]],
                     floor: float, heading_similarity: float | None = None) -> Features | None:
    """Features of answering ``query`` with ``results[0]``; ``lexical`` is the lexical leg's (article id, BM25
    score) in rank order; ``heading_similarity`` the cosine of the question and ``cited_heading`` (the section's
    cosine when unknown). None when no result carries a cosine (nothing to answer from)."""
    scored = [r for r in results if r.similarity is not None]
    if not scored:
        return None
    top = results[0]
    similarity = top.similarity if top.similarity is not None else 0.0
    others = [r.similarity for r in scored if r.id != top.id]
    lexical_ids = [article_id for article_id, _ in lexical[:LEXICAL_DEPTH]]
    rank = lexical_ids.index(top.id) + 1 if top.id in lexical_ids else ABSENT_RANK
    score = lexical[rank - 1][1] if rank != ABSENT_RANK else 0.0
    wanted = content_words(query)
    found = content_words(f"{top.title}\n{top.section_text or top.snippet}")
    return Features(
        top_similarity=round(max(r.similarity for r in scored), 6),
        section_similarity=round(top.section_similarity if top.section_similarity is not None else similarity, 6),
        margin=round(similarity - max(others) if others else similarity, 6),
        bm25_score=round(float(score or 0.0), 6), bm25_rank=rank,
        legs_agree=bool(lexical_ids) and lexical_ids[0] == top.id,
        word_overlap=round(len(wanted & found) / len(wanted), 6) if wanted else 0.0,
        question_words=len(wanted), above_floor=sum(1 for r in scored if r.similarity >= floor),
        heading_similarity=round(heading_similarity if heading_similarity is not None else
                                 (top.section_similarity or similarity), 6),
    )
