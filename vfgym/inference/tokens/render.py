"""Rendering a conversation to the model's token ids: the server's `/tokenize`, or a
local tokenizer that sees the messages as vLLM does.

Token-exact mode renders only what the model did not sample (the first prompt and
the environment's messages between model turns), always with the chat template
the server serves; the ids the model sampled are never rendered again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, Protocol

from openai import AsyncOpenAI, OpenAI

from vfgym.errors import ModelCallError


class Renderer(Protocol):
    """Turns chat messages into the template's token ids."""

    async def render(
        self, messages: Sequence[Any], tools: Any, add_generation_prompt: bool
    ) -> list[int]: ...


def with_parsed_arguments(messages: Sequence[Any]) -> list[Any]:
    """`messages` with each tool call's `function.arguments` parsed from its JSON string.

    vLLM parses them before applying the chat template (so Qwen's template prints an
    object), where a Hugging Face tokenizer given the wire format prints a quoted
    string: ids the server never sees. Arguments that are not valid JSON stay text.
    Messages without tool calls are passed through unchanged (not copied).
    """
    out: list[Any] = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not calls:
            out.append(message)
            continue
        parsed = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(function, dict) and isinstance(arguments, str):
                try:
                    call = {**call, "function": {**function, "arguments": json.loads(arguments)}}
                except json.JSONDecodeError:
                    pass
            parsed.append(call)
        out.append({**message, "tool_calls": parsed})
    return out


def jinja_template(tokenizer: Any) -> bool:
    """Whether `tokenizer` renders with a Hugging Face Jinja chat template (which vLLM
    feeds parsed tool-call arguments); vfgym's own tokenizers render the wire format."""
    return isinstance(getattr(tokenizer, "chat_template", None), str | dict)


def server_root(base_url: str) -> str:
    """The server's root URL (vLLM's `/tokenize` is beside `/v1`, not under it)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class ServerRenderer:
    """The server's own `/tokenize` with `messages`: its exact chat template.

    Sent through the rollout's openai client, so its connection pool, headers and
    key are reused; a failure is a `ModelCallError` that ends the rollout as errored.
    """

    def __init__(self, client: AsyncOpenAI | OpenAI, model: str) -> None:
        self._client = client
        self._model = model
        self._url = server_root(str(client.base_url)) + "/tokenize"

    async def render(
        self, messages: Sequence[Any], tools: Any, add_generation_prompt: bool
    ) -> list[int]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": list(messages),
            "add_generation_prompt": add_generation_prompt,
            "add_special_tokens": False,
        }
        if tools:
            body["tools"] = tools
        try:
            if isinstance(self._client, AsyncOpenAI):
                answer = await self._client.post(self._url, body=body, cast_to=object)
            else:
                answer = await asyncio.to_thread(
                    self._client.post, self._url, body=body, cast_to=object
                )
        except Exception as exc:
            raise ModelCallError(
                f"token-exact mode could not render the conversation with {self._url} "
                f"({type(exc).__name__}: {exc}); use chat mode (token_mode='chat') on a server "
                "without a messages form of /tokenize",
                attempts=1,
            ) from exc
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            raise ModelCallError(
                f"{self._url} answered without a 'tokens' list: {answer!r:.200}", attempts=1
            )
        return [int(t) for t in tokens]


class LocalRenderer:
    """A local (Hugging Face-like) tokenizer's `apply_chat_template`, fed the messages
    as vLLM feeds its template (tool-call arguments parsed, see `with_parsed_arguments`)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    async def render(
        self, messages: Sequence[Any], tools: Any, add_generation_prompt: bool
    ) -> list[int]:
        if jinja_template(self._tokenizer):
            messages = with_parsed_arguments(messages)
        ids = self._tokenizer.apply_chat_template(
            list(messages),
            tools=tools or None,
            tokenize=True,
            add_generation_prompt=add_generation_prompt,
        )
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # a BatchEncoding
            ids = ids["input_ids"]
        return [int(t) for t in ids]


__all__ = [
    "LocalRenderer",
    "Renderer",
    "ServerRenderer",
    "jinja_template",
    "server_root",
    "with_parsed_arguments",
]
