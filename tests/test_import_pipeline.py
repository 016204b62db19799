"""Imports embed ahead of writing: the next batch is in the model while this one is stored."""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np
import sqlalchemy as sa

from service.knowledge.articles import bulk_add_articles

from .helpers import CountingEmbedder

ARTICLES = [{"title": f"How to reset password number {i}", "content": f"Open settings {i}, then choose reset."}
            for i in range(6)]


class SecondBatchSignal(CountingEmbedder):
    """Sets ``second_started`` when the second batch reaches the model."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.second_started = threading.Event()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls:
            self.second_started.set()
        return super().embed(texts)


def test_the_next_batch_is_embedded_while_the_first_is_written(session, local_embedder):
    embedder = SecondBatchSignal(local_embedder)
    waited: list[bool] = []

    def on_progress(count: int) -> None:
        # The first batch is stored; writing one batch at a time, the second would only now reach the model.
        if not waited:
            waited.append(embedder.second_started.wait(timeout=10))

    ids = bulk_add_articles(session, embedder, ARTICLES, batch_size=3, on_progress=on_progress)
    assert waited == [True]
    assert len(ids) == 6 and len(embedder.calls) == 2
    stored = session.execute(sa.text("SELECT count(*) FROM knowledge_sections WHERE article_id = ANY(:ids) "
                                     "AND embedding IS NOT NULL"), {"ids": ids}).scalar_one()
    assert stored >= 6
