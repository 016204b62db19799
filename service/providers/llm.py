"""Chat models behind one small interface; the real one speaks any OpenAI-compatible API."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from service.config import Settings


class LLMError(RuntimeError):
    """The chat model could not produce an answer (down, timed out, malformed reply)."""


@dataclass(frozen=True)
class ChatReply:
    """The model's text plus what it cost."""

    text: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float


class ChatModel(Protocol):
    """Answers a list of chat messages."""

    model_name: str

    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                 json_object: bool = False) -> ChatReply:
        """Return the assistant's reply or raise LLMError (``temperature``: instead of the configured one;
        ``json_object``: ask for a JSON object)."""


class OpenAIChatModel:
    """Chat completions through the openai SDK against any OpenAI-compatible server."""

    def __init__(self, settings: Settings) -> None:
        from openai import OpenAI  # only when a model is configured: the SDK costs ~0.3 s to import

        self.model_name = settings.llm_model
        self.temperature = settings.llm_temperature
        self.max_tokens = settings.llm_max_tokens
        # The SDK retries 408/409/429/5xx and connection errors with exponential backoff.
        self.client = OpenAI(
            api_key=settings.llm_api_key or "not-needed",
            base_url=settings.llm_base_url,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )

    def complete(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                 json_object: bool = False) -> ChatReply:
        """One chat completion; every failure becomes LLMError."""
        started = time.perf_counter()
        extra = {"response_format": {"type": "json_object"}} if json_object else {}
        try:
            response = self.client.chat.completions.create(
                model=self.model_name, messages=messages,
                temperature=self.temperature if temperature is None else temperature,
                max_tokens=self.max_tokens, **extra,
            )
            text = response.choices[0].message.content
        except Exception as exc:  # the SDK raises many types; callers need one
            raise LLMError(f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(text, str) or not text.strip():
            raise LLMError("the model returned an empty answer")
        usage = response.usage
        return ChatReply(
            text=text.strip(), model=response.model or self.model_name,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            latency_ms=(time.perf_counter() - started) * 1000,
        )


def make_chat_model(settings: Settings) -> ChatModel | None:
    """The configured model, or None when no LLM is configured (offline: extractive answers)."""
    if settings.llm_api_key or settings.llm_base_url:
        return OpenAIChatModel(settings)
    return None
