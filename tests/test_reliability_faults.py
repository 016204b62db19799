"""Failure injection through the HTTP API, with both providers on the local OpenAI-compatible test server:
what a user sees when the embedding API or the language model is down, slow, rate limiting or malformed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator

import pytest

from service.knowledge.articles import reembed_batch
from service.providers.embeddings import OpenAIEmbedder
from service.providers.llm import OpenAIChatModel
from service.web.app import create_app

from .conftest import bearer_environ
from .fake_openai import FakeOpenAIServer

PASSWORD_TICKET = {"subject": "Forgot my password", "body": "I forgot my password and can't log in. How do I reset it?"}


@pytest.fixture
def chat_server() -> Iterator[FakeOpenAIServer]:
    """A second fake server for chat, so a fault injected there cannot hit the ticket's embedding call."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def remote(runtime, fake_openai, chat_server) -> Iterator[Any]:
    """The test runtime with embeddings and chat from the fake servers (no retries, short timeouts), seeded."""
    runtime.settings = replace(
        runtime.settings, embedding_provider="openai", embedding_model="text-embedding-3-small",
        embedding_base_url=fake_openai.base_url, embedding_api_key="k", embedding_max_retries=0,
        embedding_timeout=0.5, llm_base_url=chat_server.base_url, llm_api_key="k", llm_max_retries=0,
        llm_timeout=0.5, answer_min_similarity=-1.0,  # the fake's vectors are random: let the gate pass
        answer_gate="floor")  # (no calibrated confidence means anything over random vectors)
    runtime._embedder = OpenAIEmbedder(runtime.settings)
    runtime.chat = OpenAIChatModel(runtime.settings)
    assert runtime.seed() == 5
    yield runtime
    runtime._embedder.client.close()
    runtime.chat.client.close()


@pytest.fixture
def api(remote):
    """An admin client of an app on that runtime."""
    client = create_app({"TESTING": True}, runtime=remote).test_client()
    client.environ_base.update(bearer_environ(remote))
    return client


EMBEDDING_FAULTS: list[tuple[str, Callable[[Any], None]]] = [
    ("down-503", lambda server: server.fail_next(503)),
    ("rate-limited-429", lambda server: server.fail_next(429)),
    ("slow-past-timeout", lambda server: server.stall_next(2.0)),
    ("malformed-json", lambda server: server.malformed_next()),
]


@pytest.mark.parametrize("inject", [f[1] for f in EMBEDDING_FAULTS], ids=[f[0] for f in EMBEDDING_FAULTS])
def test_embedding_fault_during_add_stores_the_article_pending_and_reembed_catches_up(remote, api, fake_openai,
                                                                                    inject):
    inject(fake_openai)
    created = api.post("/api/articles", json={"title": "Gift cards", "content": "Balance under Account."})
    assert created.status_code == 201
    article = created.get_json()["article"]
    assert article["embedding_status"] == "pending" and article["embedding_error"]

    with remote.session() as session:  # what `supportrag reembed` runs, once the provider is back
        assert reembed_batch(session, remote.embedder) == 1
    assert api.get(f"/api/articles/{article['id']}").get_json()["article"]["embedding_status"] == "embedded"


@pytest.mark.parametrize("inject", [f[1] for f in EMBEDDING_FAULTS], ids=[f[0] for f in EMBEDDING_FAULTS])
def test_embedding_fault_during_search_falls_back_to_keywords_and_says_so(api, fake_openai, inject):
    inject(fake_openai)
    response = api.post("/api/search", json={"query": "reset password"})
    assert response.status_code == 200
    body = response.get_json()
    assert body["degraded"] and body["mode"] == "lexical"
    assert body["results"][0]["title"] == "Reset your password"


LLM_FAULTS: list[tuple[str, Callable[[Any], None]]] = [
    ("down-503", lambda server: server.fail_next(503)),
    ("rate-limited-429", lambda server: server.fail_next(429)),
    ("slow-past-timeout", lambda server: server.stall_next(2.0)),
    ("malformed-json", lambda server: server.malformed_next()),
]


@pytest.mark.parametrize("inject", [f[1] for f in LLM_FAULTS], ids=[f[0] for f in LLM_FAULTS])
def test_llm_fault_still_answers_the_ticket_extractively_and_flags_it(api, chat_server, inject):
    inject(chat_server)
    response = api.post("/api/tickets", json=PASSWORD_TICKET)
    assert response.status_code == 201
    ticket = response.get_json()["ticket"]
    assert (ticket["status"], ticket["mode"]) == ("answered", "extractive")
    assert ticket["error"] and "language model failed" in ticket["reason"]
    assert api.get(f"/api/tickets/{ticket['id']}").get_json()["ticket"]["answer"] == ticket["answer"]
