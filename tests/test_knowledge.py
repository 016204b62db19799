"""Knowledge-base use cases on a real Postgres: add, validate, embed-or-pend, stale models, update, search."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from service.config import Settings
from service.db.models import Article
from service.knowledge.articles import (
    ArticleNotFound,
    add_article,
    count_needing_embedding,
    delete_article,
    get_article,
    knowledge_stats,
    reembed_batch,
    update_article,
)
from service.providers.embeddings import (
    EmbeddingError,
    OpenAIEmbedder,
    article_embedding_text,
    embed_padded,
    text_sha256,
)
from service.retrieval.search import make_snippet, search_knowledge
from service.validation import ValidationError

from .helpers import CountingEmbedder, FailingEmbedder

PASSWORD = {
    "title": "Reset your password",
    "content": "Go to the Sign in page and select Forgot password. We email you a reset link.",
    "category": "Account",
}
ORDERS = {
    "title": "Track your order",
    "content": "Open Account > Orders and select Track package to see where your parcel is.",
    "category": "Shipping",
}
REFUNDS = {
    "title": "How to request a refund",
    "content": "Return unused items within 30 days of delivery and we refund the original payment method.",
    "category": "Returns",
}






def stored_row(session, article_id: int) -> dict:
    """The raw row, read with SQL rather than through the code under test."""
    return dict(session.execute(sa.text(
        "SELECT embedding IS NOT NULL AS has_embedding, embedding_model, content_sha256 "
        "FROM knowledge_base WHERE id = :id"), {"id": article_id}).mappings().one())


def result_ids(session, embedder, query: str) -> list[int]:
    return [r.id for r in search_knowledge(session, embedder, query, limit=50)]


# ---------------------------------------------------------------- add_article

def test_add_article_stores_the_row_with_its_embedding_model_and_text_hash(session, local_embedder):
    article = add_article(session, local_embedder, {**PASSWORD, "importance": 1.5})
    assert article.id > 0
    assert (article.title, article.content, article.category) == (
        PASSWORD["title"], PASSWORD["content"], "Account")
    assert article.importance == 1.5
    assert article.embedding_status == "embedded" and article.embedding_error is None
    assert article.embedding_model == "local:all-MiniLM-L6-v2"
    row = stored_row(session, article.id)
    assert row["has_embedding"]
    assert row["embedding_model"] == local_embedder.model_name
    assert row["content_sha256"] == text_sha256(article_embedding_text(PASSWORD["title"], PASSWORD["content"]))


def test_add_article_stores_the_padded_vector_of_the_embedded_text(session, local_embedder):
    article = add_article(session, local_embedder, PASSWORD)
    stored = session.scalars(
        sa.select(Article.embedding).where(Article.id == article.id)).one()
    expected = embed_padded(local_embedder, [article_embedding_text(PASSWORD["title"], PASSWORD["content"])])[0]
    assert np.allclose(np.asarray(stored), expected, atol=1e-6)


def test_add_article_defaults_importance_to_one_and_strips_text(session, local_embedder):
    article = add_article(session, local_embedder, {"title": "  Spaced title ", "content": " body \n"})
    assert (article.title, article.content, article.category, article.importance) == (
        "Spaced title", "body", None, 1.0)


@pytest.mark.parametrize("fields, field", [
    ({"title": "", "content": "c"}, "title"),
    ({"title": "   ", "content": "c"}, "title"),
    ({"title": "t" * 301, "content": "c"}, "title"),
    ({"title": 42, "content": "c"}, "title"),
    ({"content": "c"}, "title"),
    ({"title": "t", "content": ""}, "content"),
    ({"title": "t", "content": "c" * 100_001}, "content"),
    ({"title": "t"}, "content"),
    ({"title": "t", "content": "c", "category": "x" * 65}, "category"),
    ({"title": "t", "content": "c", "category": 7}, "category"),
    ({"title": "t", "content": "c", "importance": -0.01}, "importance"),
    ({"title": "t", "content": "c", "importance": 2.01}, "importance"),
    ({"title": "t", "content": "c", "importance": float("nan")}, "importance"),
    ({"title": "t", "content": "c", "importance": float("inf")}, "importance"),
    ({"title": "t", "content": "c", "importance": "1"}, "importance"),
    ({"title": "t", "content": "c", "importance": True}, "importance"),
    ({"title": "t", "content": "c", "colour": "red"}, "colour"),
])
def test_add_article_rejects_each_invalid_field_with_details(session, fields, field):
    embedder = CountingEmbedder(FailingEmbedder())
    before = session.execute(sa.select(sa.func.count()).select_from(Article)).scalar_one()
    with pytest.raises(ValidationError) as caught:
        add_article(session, embedder, fields)
    assert set(caught.value.details) == {field}
    assert caught.value.details[field]
    assert embedder.calls == []
    assert session.execute(sa.select(sa.func.count()).select_from(Article)).scalar_one() == before


def test_add_article_reports_every_invalid_field_at_once(session, local_embedder):
    with pytest.raises(ValidationError) as caught:
        add_article(session, local_embedder, {"title": "", "content": "", "importance": 3, "x": 1})
    assert set(caught.value.details) == {"title", "content", "importance", "x"}


@pytest.mark.parametrize("fields", [
    {"title": "t" * 300, "content": "c"},
    {"title": "t", "content": "word " * 20_000},
    {"title": "t", "content": "c", "category": "x" * 64},
    {"title": "t", "content": "c", "importance": 0},
    {"title": "t", "content": "c", "importance": 2},
    {"title": "t", "content": "c", "category": None},
])
def test_add_article_accepts_values_on_the_limits(session, local_embedder, fields):
    article = add_article(session, local_embedder, fields)
    assert article.embedding_status == "embedded"


# ---------------------------------------------------------------- provider failure → pending

def test_embedder_failure_stores_the_article_as_pending_with_the_error(session):
    article = add_article(session, FailingEmbedder(), PASSWORD)
    assert article.embedding_status == "pending"
    assert "provider unavailable" in article.embedding_error
    assert article.embedding_model is None
    assert stored_row(session, article.id) == {
        "has_embedding": False, "embedding_model": None, "content_sha256": None}
    assert get_article(session, article.id, "local:all-MiniLM-L6-v2").embedding_status == "pending"


def test_pending_article_is_not_searchable_until_reembedded(session, local_embedder):
    control = add_article(session, local_embedder, ORDERS)
    pending = add_article(session, FailingEmbedder(), PASSWORD)
    before = count_needing_embedding(session, local_embedder.model_name)
    assert before >= 1
    stats = knowledge_stats(session, local_embedder.model_name)
    assert stats["pending"] >= 1

    query = "I forgot my password, how do I reset it?"
    ids = result_ids(session, local_embedder, query)
    assert control.id in ids
    assert pending.id not in ids

    assert reembed_batch(session, local_embedder, batch_size=50) == before
    assert count_needing_embedding(session, local_embedder.model_name) == 0
    assert stored_row(session, pending.id)["content_sha256"] == text_sha256(
        article_embedding_text(PASSWORD["title"], PASSWORD["content"]))
    assert get_article(session, pending.id, local_embedder.model_name).embedding_status == "embedded"
    assert result_ids(session, local_embedder, query)[0] == pending.id


def test_openai_outage_stores_pending_and_reembed_recovers_it(session, fake_openai, tmp_path):
    settings = Settings(data_dir=tmp_path, auto_seed=False, embedding_provider="openai",
                        embedding_model="text-embedding-3-small", embedding_base_url=fake_openai.base_url,
                        embedding_api_key="k", embedding_dimensions=384, embedding_max_retries=0)
    embedder = OpenAIEmbedder(settings)
    try:
        fake_openai.fail_next(503, times=1)
        article = add_article(session, embedder, PASSWORD)
        assert article.embedding_status == "pending"
        assert article.embedding_error
        assert count_needing_embedding(session, embedder.model_name) >= 1

        assert reembed_batch(session, embedder, batch_size=50) >= 1
        row = stored_row(session, article.id)
        assert row["has_embedding"] and row["embedding_model"] == "openai:text-embedding-3-small@384"
        # The fake's vectors are deterministic per text: the article's own text finds it first.
        text = article_embedding_text(PASSWORD["title"], PASSWORD["content"])
        assert result_ids(session, embedder, text)[0] == article.id
    finally:
        embedder.client.close()


def test_reembed_failure_aborts_the_batch_and_keeps_rows_pending(session):
    article = add_article(session, FailingEmbedder(), PASSWORD)
    with pytest.raises(EmbeddingError):
        reembed_batch(session, FailingEmbedder(), batch_size=50)
    assert stored_row(session, article.id)["has_embedding"] is False


# ---------------------------------------------------------------- vectors from another model

def test_rows_embedded_by_another_model_are_stale_excluded_and_reembedded(session, local_embedder):
    other = CountingEmbedder(local_embedder, model_name="other-model")
    stale = add_article(session, other, PASSWORD)
    current = add_article(session, local_embedder, ORDERS)
    active = local_embedder.model_name
    assert stale.embedding_model == "other-model"

    assert get_article(session, stale.id, active).embedding_status == "stale"
    assert get_article(session, current.id, active).embedding_status == "embedded"
    before = knowledge_stats(session, active)
    assert before["stale"] >= 1 and before["model"] == active

    # Its vector is exactly what the active model makes for this text, so only the model filter keeps it out.
    text = article_embedding_text(PASSWORD["title"], PASSWORD["content"])
    ids = result_ids(session, local_embedder, text)
    assert stale.id not in ids and current.id in ids

    needing = count_needing_embedding(session, active)
    assert reembed_batch(session, local_embedder, batch_size=50) == needing
    assert stored_row(session, stale.id)["embedding_model"] == active
    assert get_article(session, stale.id, active).embedding_status == "embedded"
    after = knowledge_stats(session, active)
    assert (after["stale"], after["pending"]) == (0, 0)
    assert after["embedded"] == before["embedded"] + before["stale"] + before["pending"]
    assert result_ids(session, local_embedder, text)[0] == stale.id


def test_knowledge_stats_counts_each_state_and_no_index_until_one_is_built(session, local_embedder):
    active = local_embedder.model_name
    before = knowledge_stats(session, active)
    add_article(session, local_embedder, PASSWORD)
    add_article(session, FailingEmbedder(), ORDERS)
    add_article(session, CountingEmbedder(local_embedder, model_name="other-model"), REFUNDS)
    after = knowledge_stats(session, active)
    assert {key: after[key] - before[key] for key in ("articles", "embedded", "pending", "stale")} == {
        "articles": 3, "embedded": 1, "pending": 1, "stale": 1}
    assert after["index"] is None  # exact search reads none; the approximate mode's is built on demand


# ---------------------------------------------------------------- update_article / delete_article

@pytest.fixture
def counting(local_embedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


def test_changing_only_importance_does_not_call_the_embedder(session, counting):
    article = add_article(session, counting, PASSWORD)
    sha = stored_row(session, article.id)["content_sha256"]
    counting.calls.clear()
    updated = update_article(session, counting, article.id, {"importance": 2.0})
    assert counting.calls == []
    assert updated.importance == 2.0
    assert updated.embedding_status == "embedded"
    assert stored_row(session, article.id)["content_sha256"] == sha


def test_changing_only_category_does_not_call_the_embedder(session, counting):
    article = add_article(session, counting, PASSWORD)
    counting.calls.clear()
    updated = update_article(session, counting, article.id, {"category": "Security"})
    assert counting.calls == []
    assert updated.category == "Security" and updated.embedding_status == "embedded"


def test_changing_content_reembeds_and_updates_the_hash(session, counting):
    article = add_article(session, counting, PASSWORD)
    counting.calls.clear()
    new_content = "Passwords are now reset from the mobile app under Settings > Security."
    updated = update_article(session, counting, article.id, {"content": new_content})
    expected_text = article_embedding_text(PASSWORD["title"], new_content)
    assert counting.calls == [[expected_text]]
    assert updated.content == new_content and updated.embedding_status == "embedded"
    assert stored_row(session, article.id)["content_sha256"] == text_sha256(expected_text)


def test_changing_title_reembeds(session, counting):
    article = add_article(session, counting, PASSWORD)
    counting.calls.clear()
    update_article(session, counting, article.id, {"title": "Recover your account"})
    assert counting.calls == [[article_embedding_text("Recover your account", PASSWORD["content"])]]


def test_resubmitting_identical_text_does_not_reembed(session, counting):
    article = add_article(session, counting, PASSWORD)
    counting.calls.clear()
    updated = update_article(session, counting, article.id, {
        "title": PASSWORD["title"], "content": f"  {PASSWORD['content']}\n"})
    assert counting.calls == []
    assert updated.embedding_status == "embedded"


def test_update_with_failing_embedder_leaves_the_article_pending(session, local_embedder):
    article = add_article(session, local_embedder, PASSWORD)
    updated = update_article(session, FailingEmbedder(), article.id, {"content": "Brand new text."})
    assert updated.content == "Brand new text."
    assert updated.embedding_status == "pending" and updated.embedding_error
    assert stored_row(session, article.id)["has_embedding"] is False


def test_update_validates_fields_partially(session, local_embedder):
    article = add_article(session, local_embedder, PASSWORD)
    with pytest.raises(ValidationError) as caught:
        update_article(session, local_embedder, article.id, {"importance": 5, "colour": "red"})
    assert set(caught.value.details) == {"importance", "colour"}


def missing_id(session) -> int:
    return (session.execute(sa.select(sa.func.max(Article.id))).scalar_one() or 0) + 1000


def test_missing_ids_raise_article_not_found(session, local_embedder):
    absent = missing_id(session)
    with pytest.raises(ArticleNotFound):
        get_article(session, absent, local_embedder.model_name)
    with pytest.raises(ArticleNotFound):
        update_article(session, local_embedder, absent, {"importance": 1.0})
    with pytest.raises(ArticleNotFound):
        delete_article(session, absent)


def test_delete_article_removes_it_from_reads_and_search(session, local_embedder):
    article = add_article(session, local_embedder, PASSWORD)
    delete_article(session, article.id)
    with pytest.raises(ArticleNotFound):
        get_article(session, article.id, local_embedder.model_name)
    assert article.id not in result_ids(session, local_embedder, "reset my password")
    with pytest.raises(ArticleNotFound):
        delete_article(session, article.id)


# ---------------------------------------------------------------- make_snippet (pure)

ARTICLE = (
    "Changed your mind? You can return most items within 30 days. "
    "Refunds go back to the original payment method. "
    "Gift cards cannot be refunded."
)


@pytest.mark.parametrize("content, query, expected", [
    # the sentence sharing most query words wins, and what follows it is kept
    (ARTICLE, "when will my refund reach my payment method",
     "Refunds go back to the original payment method. Gift cards cannot be refunded."),
    (ARTICLE, "are gift cards refundable", "Gift cards cannot be refunded."),
    # a tie goes to the earlier sentence
    ("Alpha beta. Gamma beta. Delta.", "beta", "Alpha beta. Gamma beta. Delta."),
    # no shared word (or only stop words): the start of the article
    (ARTICLE, "website not loading", ARTICLE),
    (ARTICLE, "what is the", ARTICLE),
    # markdown headings and bullets are split on new lines and their markers dropped
    ("## Refund policy\n- Items must be unused.\n- Gift cards are final.", "gift card final",
     "Gift cards are final."),
    ("", "anything", ""),
    ("   \n\n  ", "anything", ""),
])
def test_make_snippet_picks_the_sentence_sharing_most_query_words(content, query, expected):
    assert make_snippet(content, query) == expected


@pytest.mark.parametrize("max_chars", [20, 40, 60, 90])
def test_make_snippet_cuts_long_text_at_a_word_with_an_ellipsis(max_chars):
    content = "Refunds arrive within five business days, after we receive the returned parcel at our warehouse."
    snippet = make_snippet(content, "refunds", max_chars=max_chars)
    assert len(snippet) <= max_chars
    assert snippet.endswith("…")
    body = snippet[:-1]
    assert content.startswith(body)
    assert content[len(body)] in " ,"  # cut between words, never inside one
    assert not body.endswith((" ", ",", ";", ":"))


def test_make_snippet_keeps_text_that_fits_whole():
    assert make_snippet("Short answer.", "answer", max_chars=13) == "Short answer."


def test_make_snippet_cuts_a_single_long_word_hard():
    snippet = make_snippet("x" * 50, "x", max_chars=10)
    assert snippet == "x" * 9 + "…"


def test_search_results_carry_the_best_matching_snippet(session, local_embedder):
    article = add_article(session, local_embedder, {
        "title": "Reset your password",
        "content": "Our store is open every day. Select Forgot password on the Sign in page to get a reset link.",
    })
    results = search_knowledge(session, local_embedder, "forgot password sign in", limit=50)
    mine = next(r for r in results if r.id == article.id)
    assert mine.snippet == "Select Forgot password on the Sign in page to get a reset link."
    assert 0.0 < mine.similarity <= 1.0
