"""Embedding providers: padding, hashing, the OpenAI client over the real wire format, the local model."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from service.config import VECTOR_DIMENSIONS, ConfigError, Settings
from service.providers.embeddings import (
    EmbeddingError,
    OpenAIEmbedder,
    article_embedding_text,
    embed_padded,
    make_embedder,
    pad_vectors,
    text_sha256,
)

from .fake_openai import text_vector

TEXTS = ["alpha", "bravo", "charlie", "delta", "echo"]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity in float64, independent of the code under test."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---------------------------------------------------------------- pad_vectors

@pytest.mark.parametrize("width", [1, 3, 384, 768, 1024, 1535])
def test_zero_padding_to_column_width_keeps_cosine_similarity(width):
    rng = np.random.default_rng(width)
    vectors = rng.standard_normal((4, width)).astype(np.float32)
    padded = pad_vectors(vectors)
    assert padded.shape == (4, VECTOR_DIMENSIONS)
    assert np.array_equal(padded[:, :width], vectors)
    assert not padded[:, width:].any()
    for i in range(4):
        for j in range(4):
            assert cosine(padded[i], padded[j]) == pytest.approx(cosine(vectors[i], vectors[j]), abs=1e-6)


def test_vectors_already_at_column_width_are_returned_unchanged():
    vectors = np.random.default_rng(7).standard_normal((3, VECTOR_DIMENSIONS)).astype(np.float32)
    padded = pad_vectors(vectors)
    assert padded.shape == (3, VECTOR_DIMENSIONS)
    assert np.array_equal(padded, vectors)


@pytest.mark.parametrize("width", [VECTOR_DIMENSIONS + 1, 3072])
def test_vectors_wider_than_the_column_are_a_config_error(width):
    with pytest.raises(ConfigError):
        pad_vectors(np.ones((2, width), dtype=np.float32))


def test_padding_a_one_dimensional_array_is_an_embedding_error():
    with pytest.raises(EmbeddingError):
        pad_vectors(np.ones(384, dtype=np.float32))


# ---------------------------------------------------------------- embedded text and its hash

def test_article_embedding_text_is_deterministic_title_then_content():
    first = article_embedding_text("Reset your password", "Go to Sign in.", "Account")
    second = article_embedding_text("Reset your password", "Go to Sign in.", "Account")
    assert first == second == "Reset your password\n\nGo to Sign in."


def test_article_embedding_text_ignores_category_and_surrounding_whitespace():
    assert article_embedding_text("  T \n", "\n C  ", "Billing") == article_embedding_text("T", "C", None)


def test_text_sha256_is_the_hex_sha256_of_the_utf8_text():
    assert text_sha256("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert text_sha256("héllo") == text_sha256("héllo")
    assert len(text_sha256("héllo")) == 64


@pytest.mark.parametrize("title, content", [
    ("Reset your password!", "Go to Sign in."),   # title changed
    ("Reset your password", "Go to Sign in"),     # content changed
    ("Reset your Password", "Go to Sign in."),    # case matters
    ("Reset your password", "Go to Sign in.\nThen select Forgot password."),
])
def test_changing_title_or_content_changes_the_hash(title, content):
    original = text_sha256(article_embedding_text("Reset your password", "Go to Sign in."))
    assert text_sha256(article_embedding_text(title, content)) != original


# ---------------------------------------------------------------- OpenAIEmbedder over HTTP

@pytest.fixture
def openai_embedder(fake_openai, tmp_path):
    """Build OpenAIEmbedders against the fake server; their HTTP clients are closed afterwards."""
    made: list[OpenAIEmbedder] = []

    def build(**overrides) -> OpenAIEmbedder:
        settings = Settings(
            data_dir=tmp_path, auto_seed=False, embedding_provider="openai",
            embedding_model="text-embedding-3-small", embedding_base_url=fake_openai.base_url,
            embedding_api_key="k", embedding_batch_size=2, embedding_max_retries=0, embedding_timeout=10.0,
        )
        embedder = OpenAIEmbedder(dataclasses.replace(settings, **overrides))
        made.append(embedder)
        return embedder

    yield build
    for embedder in made:
        embedder.client.close()


def test_openai_vectors_follow_input_order_although_the_json_is_reversed(fake_openai, openai_embedder):
    vectors = openai_embedder().embed(TEXTS)
    assert vectors.shape == (5, VECTOR_DIMENSIONS)
    for text, vector in zip(TEXTS, vectors):
        assert np.allclose(vector, text_vector(text, VECTOR_DIMENSIONS), atol=1e-6)


def test_openai_embedder_splits_input_into_batches_of_batch_size(fake_openai, openai_embedder):
    openai_embedder(embedding_batch_size=2).embed(TEXTS)
    inputs = [request["body"]["input"] for request in fake_openai.embedding_requests()]
    assert inputs == [["alpha", "bravo"], ["charlie", "delta"], ["echo"]]


def test_openai_embedder_sends_dimensions_when_configured_and_pads_to_column(fake_openai, openai_embedder):
    embedder = openai_embedder(embedding_dimensions=384)
    padded = embed_padded(embedder, TEXTS[:3])
    bodies = [request["body"] for request in fake_openai.embedding_requests()]
    assert bodies and all(body["dimensions"] == 384 for body in bodies)
    assert all(body["model"] == "text-embedding-3-small" for body in bodies)
    assert padded.shape == (3, VECTOR_DIMENSIONS)
    for text, vector in zip(TEXTS[:3], padded):
        assert np.allclose(vector[:384], text_vector(text, 384), atol=1e-6)
        assert not vector[384:].any()


def test_openai_embedder_omits_dimensions_when_not_configured(fake_openai, openai_embedder):
    openai_embedder().embed(TEXTS[:2])
    bodies = [request["body"] for request in fake_openai.embedding_requests()]
    assert bodies and all("dimensions" not in body for body in bodies)


@pytest.mark.parametrize("dimensions, model_name, width", [
    (None, "openai:text-embedding-3-small", VECTOR_DIMENSIONS),
    (384, "openai:text-embedding-3-small@384", 384),
])
def test_openai_model_name_records_the_requested_dimensions(openai_embedder, dimensions, model_name, width):
    embedder = openai_embedder(embedding_dimensions=dimensions)
    assert embedder.model_name == model_name
    assert embedder.dimensions == width


def test_openai_embedder_sends_the_api_key_as_bearer_token(fake_openai, openai_embedder):
    openai_embedder(embedding_api_key="secret-key").embed(["hello"])
    assert [r["authorization"] for r in fake_openai.embedding_requests()] == ["Bearer secret-key"]


@pytest.mark.parametrize("status", [500, 429])
def test_openai_transient_failure_is_retried_by_the_sdk_and_succeeds(fake_openai, openai_embedder, status):
    fake_openai.fail_next(status, times=1)
    vectors = embed_padded(openai_embedder(embedding_max_retries=2), ["hello", "world"])
    assert len(fake_openai.embedding_requests()) == 2
    assert np.allclose(vectors[0], text_vector("hello", VECTOR_DIMENSIONS), atol=1e-6)
    assert np.allclose(vectors[1], text_vector("world", VECTOR_DIMENSIONS), atol=1e-6)


def test_openai_persistent_server_error_without_retries_is_an_embedding_error(fake_openai, openai_embedder):
    fake_openai.fail_next(500, times=5)
    with pytest.raises(EmbeddingError):
        embed_padded(openai_embedder(embedding_max_retries=0), ["hello"])
    assert len(fake_openai.embedding_requests()) == 1


def test_openai_stall_longer_than_timeout_is_an_embedding_error(fake_openai, openai_embedder):
    fake_openai.stall_next(2.0, times=1)
    embedder = openai_embedder(embedding_timeout=0.5, embedding_max_retries=0)
    started = time.monotonic()
    with pytest.raises(EmbeddingError):
        embed_padded(embedder, ["hello"])
    assert time.monotonic() - started < 1.8


def test_openai_malformed_json_is_an_embedding_error(fake_openai, openai_embedder):
    fake_openai.malformed_next(times=1)
    with pytest.raises(EmbeddingError):
        embed_padded(openai_embedder(), ["hello"])


def test_openai_model_wider_than_column_without_dimensions_is_refused_at_construction(openai_embedder):
    with pytest.raises(ConfigError, match="EMBEDDING_DIMENSIONS"):
        openai_embedder(embedding_model="text-embedding-3-large")


def test_openai_wide_model_with_dimensions_is_accepted(openai_embedder):
    embedder = openai_embedder(embedding_model="text-embedding-3-large", embedding_dimensions=1024)
    assert embedder.model_name == "openai:text-embedding-3-large@1024"


# ---------------------------------------------------------------- Settings.from_env

@pytest.mark.parametrize("env, provider, model", [
    ({}, "local", "all-MiniLM-L6-v2"),
    ({"EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1"}, "openai", "text-embedding-3-small"),
    ({"EMBEDDING_API_KEY": "k"}, "openai", "text-embedding-3-small"),
    ({"EMBEDDING_API_KEY": "", "EMBEDDING_BASE_URL": ""}, "local", "all-MiniLM-L6-v2"),
    ({"EMBEDDING_API_KEY": "k", "EMBEDDING_PROVIDER": "local"}, "local", "all-MiniLM-L6-v2"),
    ({"EMBEDDING_API_KEY": "k", "EMBEDDING_MODEL": "text-embedding-ada-002"}, "openai",
     "text-embedding-ada-002"),
])
def test_settings_pick_openai_when_a_base_url_or_api_key_is_set(tmp_path, env, provider, model):
    settings = Settings.from_env({"SUPPORTRAG_DATA_DIR": str(tmp_path), **env})
    assert settings.embedding_provider == provider
    assert settings.embedding_model == model


def test_settings_read_embedding_numbers_from_env(tmp_path):
    settings = Settings.from_env({
        "SUPPORTRAG_DATA_DIR": str(tmp_path), "EMBEDDING_API_KEY": "k", "EMBEDDING_DIMENSIONS": "384",
        "EMBEDDING_TIMEOUT": "2.5", "EMBEDDING_MAX_RETRIES": "0", "EMBEDDING_BATCH_SIZE": "16",
    })
    assert (settings.embedding_dimensions, settings.embedding_timeout) == (384, 2.5)
    assert (settings.embedding_max_retries, settings.embedding_batch_size) == (0, 16)


@pytest.mark.parametrize("env", [
    {"EMBEDDING_DIMENSIONS": "many"},
    {"EMBEDDING_DIMENSIONS": "3.5"},
    {"EMBEDDING_DIMENSIONS": "0"},
    {"EMBEDDING_DIMENSIONS": "1537"},
    {"EMBEDDING_DIMENSIONS": "-384"},
    {"EMBEDDING_TIMEOUT": "soon"},
    {"EMBEDDING_TIMEOUT": "0"},
    {"EMBEDDING_TIMEOUT": "-1"},
    {"EMBEDDING_TIMEOUT": "nan"},
    {"EMBEDDING_MAX_RETRIES": "two"},
    {"EMBEDDING_BATCH_SIZE": "lots"},
    {"EMBEDDING_BATCH_SIZE": "0"},
    {"EMBEDDING_BATCH_SIZE": "-5"},
    {"SEARCH_SIMILARITY_WEIGHT": "high"},
    {"SEARCH_SIMILARITY_WEIGHT": "nan"},
    {"SEARCH_RECENCY_WEIGHT": "low"},
    {"SEARCH_RECENCY_WINDOW_DAYS": "a year"},
    {"SEARCH_RECENCY_WINDOW_DAYS": "0"},
    {"SEARCH_RECENCY_WINDOW_DAYS": "-30"},
    {"SEARCH_RECENCY_WINDOW_DAYS": "nan"},
    {"PORT": "http"},
    {"SUPPORTRAG_MAX_REQUEST_BYTES": "1MB"},
], ids=lambda env: "-".join(f"{k}={v}" for k, v in env.items()))
def test_bad_numbers_in_env_are_config_errors(tmp_path, env):
    with pytest.raises(ConfigError):
        Settings.from_env({"SUPPORTRAG_DATA_DIR": str(tmp_path), "EMBEDDING_API_KEY": "k", **env})


def test_make_embedder_builds_the_provider_the_settings_name(fake_openai, tmp_path):
    settings = Settings.from_env({"SUPPORTRAG_DATA_DIR": str(tmp_path), "EMBEDDING_BASE_URL": fake_openai.base_url})
    embedder = make_embedder(settings)
    try:
        assert isinstance(embedder, OpenAIEmbedder)
        assert embedder.model_name == "openai:text-embedding-3-small"
    finally:
        embedder.client.close()


# ---------------------------------------------------------------- LocalEmbedder (real model)

def test_real_local_embedder_returns_unit_norm_384_dimensional_vectors(real_local_embedder):
    vectors = real_local_embedder.embed(["I forgot my password", "Track your order", "Website not loading"])
    assert real_local_embedder.model_name == "local:all-MiniLM-L6-v2"
    assert vectors.shape == (3, 384) == (3, real_local_embedder.dimensions)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_real_local_embedder_places_related_texts_closer(real_local_embedder):
    query, related, unrelated = real_local_embedder.embed(
        ["I forgot my password", "Reset your password", "Track your order"])
    assert cosine(query, related) > cosine(query, unrelated)


def test_real_local_embedder_padded_output_fits_the_column(real_local_embedder):
    padded = embed_padded(real_local_embedder, ["I forgot my password"])
    assert padded.shape == (1, VECTOR_DIMENSIONS)
    assert not padded[0, 384:].any()
