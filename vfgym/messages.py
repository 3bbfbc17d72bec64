"""Conversions between server responses and the plain-dict message format."""

from __future__ import annotations

from typing import Any

from vfgym.types import ChatCompletion, ChatMessage, Completion, Messages


def assistant_message(response: ChatCompletion) -> ChatMessage:
    """The assistant turn of a chat response as a plain dict (tool calls included).

    Tool calls are kept as plain dicts in wire format so that State stays
    JSON-serialisable and the next request can send them back unchanged.
    """
    message: ChatMessage = {"role": "assistant", "content": ""}
    if not response.choices:
        return message
    choice = response.choices[0].message
    message["content"] = choice.content or ""
    if choice.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in choice.tool_calls
        ]
    return message


def completion_text(response: Completion) -> str:
    """The generated text of a legacy completions response."""
    if not response.choices:
        return ""
    return response.choices[0].text or ""


def finish_reason(response: Any) -> str | None:
    """Why the server stopped generating ("stop", "length", "tool_calls"), if it said."""
    choices = getattr(response, "choices", None)
    return choices[0].finish_reason if choices else None


def last_content(completion: Messages) -> str:
    """The text of the last message: the usual thing a reward function inspects."""
    if isinstance(completion, str):
        return completion
    if not completion:
        return ""
    return completion[-1].get("content") or ""


def normalize_message(message: Any) -> ChatMessage:
    """Accept a dict or an openai message object; return a plain dict."""
    if isinstance(message, dict):
        return message  # type: ignore[return-value]
    if hasattr(message, "model_dump"):
        return message.model_dump(exclude_none=True)
    raise TypeError(
        f"a chat message must be a dict with 'role' and 'content', not {type(message).__name__}"
    )
