"""Read chat messages whether they are plain dicts or openai message objects.

Environments keep messages as dicts, but user code sometimes hands over the
objects the openai client returned; parsers and rubrics accept both so that a
reward function never fails on the shape of a message rather than its content.
"""

from __future__ import annotations

from typing import Any


def message_field(message: Any, key: str) -> Any:
    """One field of a message, or None when it is absent."""
    if isinstance(message, dict):
        return message.get(key)
    return getattr(message, key, None)


def message_role(message: Any) -> str | None:
    """The message's role ("system", "user", "assistant", "tool")."""
    return message_field(message, "role")


def message_text(message: Any) -> str:
    """The message's text; "" for a tool-call-only turn.

    Content may also be a list of parts (the multimodal wire format); the text
    parts are joined so parsers see the words the model wrote.
    """
    content = message_field(message, "content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if message_field(part, "type") == "text":
                texts.append(str(message_field(part, "text") or ""))
        return "".join(texts)
    return str(content)


def content_text(content: Any) -> str:
    """Text a parser was handed: a message's `content` as the openai client gives it.

    None (a turn that only calls tools) is no text and a list of content parts is its
    text parts joined, as `message_text` reads a message, so `parser.parse(message.content)`
    never fails on the shape of a turn. Anything else is refused, saying what to give.
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list | tuple):
        return message_text({"content": list(content)})
    if isinstance(content, dict) or hasattr(content, "role"):
        raise TypeError(
            "a parser's parse() takes a message's text, not the whole message; pass "
            "message['content'], or use parser.parse_answer(completion) for a conversation"
        )
    raise TypeError(
        f"a parser's parse() takes a message's text (a str, None or a list of content "
        f"parts), not a {type(content).__name__}"
    )


def tool_calls(message: Any) -> list[Any]:
    """The tool calls of an assistant message (empty when it made none).

    A `tool_calls` that is no list (a stored completion's slip: one call object, a
    number) is read as one call, which metrics count without raising."""
    calls = message_field(message, "tool_calls")
    if not calls:
        return []
    return list(calls) if isinstance(calls, list | tuple) else [calls]


def tool_call_name(call: Any) -> str | None:
    """The function name a tool call asked for, from a dict or an openai object."""
    function = message_field(call, "function")
    if function is None:
        return message_field(call, "name")
    return message_field(function, "name")


def is_tool_call_only(message: Any) -> bool:
    """True for an assistant turn that only calls tools and writes no text.

    Format rewards skip such turns: they carry no text to judge, and scoring
    them 0 would punish a model for using tools.
    """
    return bool(tool_calls(message)) and not message_text(message).strip()
