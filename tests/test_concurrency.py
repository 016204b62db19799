"""Concurrency on a real database with real connections (not the rolled-back test transaction):
first-run seeding from several processes at once, simultaneous edits of one article, reembed during edits."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.engine import create_engine
from service.db.migrate import upgrade_database
from service.db.models import Article, ArticleSection
from service.knowledge.articles import reembed_batch
from service.knowledge.indexing import plan_sections
from service.knowledge.sections import card_embedding_text, section_embedding_text
from service.providers.embeddings import text_sha256
from service.runtime import Runtime
from service.web.app import create_app

from .conftest import bearer_environ

WORKERS = 6


class SlowEmbedder:
    """The real local model under another name, slowed down so that concurrent work overlaps."""

    def __init__(self, inner, model_name: str, delay: float = 0.05) -> None:
        self.inner, self.model_name, self.dimensions, self.delay = inner, model_name, inner.dimensions, delay

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Wait, then embed."""
        time.sleep(self.delay)
        return self.inner.embed(texts)


@pytest.fixture
def database(fresh_database_url) -> Iterator[sa.Engine]:
    """A migrated, empty database with its own pool (real concurrent connections)."""
    engine = create_engine(fresh_database_url, pool_size=WORKERS)
    upgrade_database(engine)
    yield engine
    engine.dispose()


def all_at_once(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads released together by a barrier; return the results in order."""
    barrier = threading.Barrier(count)

    def run(i: int) -> Any:
        barrier.wait()
        return work(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_concurrent_first_run_seeding_inserts_exactly_five_articles(database, local_embedder, tmp_path):
    settings = Settings(data_dir=tmp_path, auto_seed=False)
    inserted = all_at_once(WORKERS, lambda _: Runtime(settings, database, local_embedder).seed())
    assert sorted(inserted) == [0] * (WORKERS - 1) + [5]
    with database.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one() == 5


@pytest.fixture
def served(database, local_embedder, tmp_path) -> Runtime:
    """A seeded runtime on that database whose embedder is slow (edits overlap)."""
    runtime = Runtime(Settings(data_dir=tmp_path, auto_seed=False), database, local_embedder)
    assert runtime.seed() == 5
    runtime._embedder = SlowEmbedder(local_embedder, local_embedder.model_name)
    return runtime


def test_concurrent_patches_of_one_article_all_succeed_and_the_last_write_wins(served):
    app = create_app({"TESTING": True}, runtime=served)
    auth = bearer_environ(served)
    with served.session() as session:
        article_id = session.scalar(sa.select(sa.func.min(Article.id)))

    def patch(i: int) -> dict[str, Any]:
        client = app.test_client()
        client.environ_base.update(auth)
        response = client.patch(f"/api/articles/{article_id}",
                                json={"title": f"Edit {i}", "content": f"Text of edit {i}.", "importance": i / 10})
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()["article"]

    answers = all_at_once(WORKERS, patch)
    last = max(answers, key=lambda article: article["updated_at"])
    client = app.test_client()
    stored = client.get(f"/api/articles/{article_id}").get_json()["article"]
    assert {k: stored[k] for k in ("title", "content", "importance")} == {
        k: last[k] for k in ("title", "content", "importance")}
    assert stored["embedding_status"] == "embedded"
    assert_vectors_match_text(served)


def assert_vectors_match_text(runtime: Runtime) -> None:
    """Every article's vectors and hashes (its own and its sections') are those of its current text."""
    embedder = runtime.embedder
    with runtime.session() as session:
        rows = session.execute(sa.select(Article.id, Article.title, Article.content, Article.content_sha256,
                                         Article.embedding)).all()
        sections = session.execute(sa.select(ArticleSection.article_id, ArticleSection.content_sha256,
                                             ArticleSection.embedding).order_by(ArticleSection.ordinal)).all()
    for row in rows:
        drafts = plan_sections(embedder, row.title, row.content)
        card = card_embedding_text(row.title, drafts)
        texts = [section_embedding_text(row.title, d.heading_path, d.text, d.kind) for d in drafts]
        assert row.content_sha256 == text_sha256(card), row.title
        stored = [s for s in sections if s.article_id == row.id]
        assert [s.content_sha256 for s in stored] == [text_sha256(text) for text in texts], row.title
        expected = embedder.inner.embed([card, *texts])
        for vector, wanted in zip([row.embedding, *(s.embedding for s in stored)], expected):
            assert np.allclose(np.asarray(vector)[:len(wanted)], wanted, atol=1e-5), row.title


def test_reembed_while_articles_are_edited_leaves_no_stale_vector_for_changed_text(served):
    # A new model: every article needs re-embedding, and edits race with `reembed` for the same rows.
    served._embedder = SlowEmbedder(served.embedder.inner, "local:renamed-model")
    app = create_app({"TESTING": True}, runtime=served)
    auth = bearer_environ(served)
    with served.session() as session:
        ids = list(session.scalars(sa.select(Article.id).order_by(Article.id)))

    def work(i: int) -> int:
        if i == 0:
            done = 0
            while True:
                with served.session() as session:
                    batch = reembed_batch(session, served.embedder, batch_size=1)
                if not batch:
                    return done
                done += batch
        client = app.test_client()
        client.environ_base.update(auth)
        for round_ in range(2):
            article_id = ids[(i + round_) % len(ids)]
            response = client.patch(f"/api/articles/{article_id}", json={"content": f"Edited by {i} in {round_}."})
            assert response.status_code == 200, response.get_data(as_text=True)
        return 0

    all_at_once(4, work)
    with served.session() as session:
        models = set(session.scalars(sa.select(Article.embedding_model)))
    assert models == {"local:renamed-model"}
    assert_vectors_match_text(served)
