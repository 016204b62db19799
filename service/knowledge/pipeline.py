"""Embedding ahead of writing: the next batches are embedded in a worker thread while the caller stores this one.

ONNX Runtime, the tokenizer and an HTTP provider all release the GIL while they work, so an import's embedding
(the model) and its writes (COPY, triggers, the BM25 statistics: PostgreSQL) run at the same time.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator, Sequence

from service.knowledge.indexing import EmbeddedBatch, IndexInput, embed_batch
from service.providers.embeddings import Embedder

AHEAD = 2  # batches embedded before they are needed: one to write from, one in the model


def embed_ahead(embedder: Embedder, batches: Sequence[Sequence[IndexInput]], *,
                ahead: int = AHEAD) -> Iterator[EmbeddedBatch]:
    """Each batch embedded (``indexing.embed_batch``), in order, up to ``ahead`` batches ahead of the consumer.

    Close the generator (``contextlib.closing``) if the consumer may stop early: pending batches are cancelled.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-ahead")
    pending: deque[Future[EmbeddedBatch]] = deque()
    upcoming = iter(batches)
    try:
        for batch in upcoming:
            pending.append(pool.submit(embed_batch, embedder, batch))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
