"""The LLM rewrite of a candidate: a help article from the agent's reply alone, as JSON title/body."""

from __future__ import annotations

import json
from dataclasses import dataclass

from service.providers.llm import ChatModel, LLMError

REWRITE_TEMPERATURE = 0.1  # a rewrite, not a creative text: stay close to the reply
SYSTEM_PROMPT = (
    "You turn a support agent's reply into a short help-center article. Use only facts the reply states; add "
    "no steps, numbers, names or promises it does not contain. Drop greetings, sign-offs and anything about one "
    "customer's account. Placeholders such as [email], [phone], [number] and [ticket] must not appear. "
    'Answer with one JSON object: {"title": "<a question or task a customer would search for>", '
    '"body": "<the article in markdown>"}.'
)


@dataclass(frozen=True)
class Rewrite:
    """The model's title and body."""

    title: str
    body: str


def rewrite_messages(title: str, replies: list[str]) -> list[dict[str, str]]:
    """The prompt: the customer's question only as a hint for the title; the body from the replies alone."""
    joined = "\n\n---\n\n".join(replies)
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Customer's question (for the title only): {title}\n\n"
                                        f"Agent's reply:\n{joined}"}]


def parse_rewrite(text: str) -> Rewrite:
    """The JSON object's title and body, or LLMError when the reply is not one."""
    cleaned = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise LLMError(f"the rewrite is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) and data[k].strip()
                                             for k in ("title", "body")):
        raise LLMError("the rewrite lacks a title or a body")
    return Rewrite(data["title"].strip(), data["body"].strip())


def rewrite_candidate(chat: ChatModel, title: str, replies: list[str]) -> Rewrite:
    """Ask the model for the article; LLMError on any failure (the caller keeps the template)."""
    reply = chat.complete(rewrite_messages(title, replies), temperature=REWRITE_TEMPERATURE, json_object=True)
    return parse_rewrite(reply.text)
