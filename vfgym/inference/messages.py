"""Conversions between server responses and the plain-dict message format, and the
check that a chat message is one a server takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vfgym.parsers._chat import message_text
from vfgym.types import ChatCompletion, ChatMessage, Completion, Messages

#: The roles of the OpenAI chat format (vLLM's too); a server refuses any other.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")

#: What a message looks like, quoted by the errors about one.
_EXAMPLE = "{'role': 'user', 'content': '...'}"


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
        message["tool_calls"] = [_wire_tool_call(call) for call in choice.tool_calls]
    return message


def _wire_tool_call(call: Any) -> dict[str, Any]:
    """One tool call of a response in wire format. A function call (the kind vfgym's
    tools make) is written field by field; another kind (OpenAI's custom tools) as
    the server sent it, so that the next request sends it back unchanged."""
    if call.type == "function":
        function = call.function
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": function.name, "arguments": function.arguments},
        }
    dumped: dict[str, Any] = call.model_dump(exclude_none=True)
    return dumped


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
    """The text of the last message: the usual thing a reward function inspects.

    Content given as parts (text and images) gives its text parts joined, so a game
    reading the text never meets a list where it expects a str.
    """
    if isinstance(completion, str):
        return completion
    if not completion:
        return ""
    return message_text(completion[-1])


def normalize_message(message: Any) -> ChatMessage:
    """Accept a dict or an openai message object; return a plain dict."""
    if isinstance(message, dict):
        return message  # type: ignore[return-value]
    if hasattr(message, "model_dump"):
        return message.model_dump(exclude_none=True)
    raise TypeError(
        f"a chat message must be a dict with 'role' and 'content', not {type(message).__name__}"
    )


def check_message(message: Mapping[str, Any], where: str) -> None:
    """Raise a TypeError or ValueError, naming `where` and saying what to give instead,
    when `message` is not a chat message a server takes.

    Dataset prompts and few-shot turns are checked when the environment is built: a bad
    one would otherwise reach the server on every rollout of its row (a real server
    answers 400) or be rendered by a chat template as something else. Only the shape is
    checked, and only what the OpenAI chat format requires: a known role; text, content
    parts or (an assistant's that calls tools) None as the content; a tool message's
    `tool_call_id`; and well-formed tool calls. Other keys are left alone.
    """
    role = message.get("role")
    if role is None:
        raise ValueError(f"{where} has no 'role'; give each message one, as in {_EXAMPLE}")
    if not isinstance(role, str) or role not in CHAT_ROLES:
        raise ValueError(
            f"{where} has role {role!r}; a chat message's role is one of "
            f"{', '.join(map(repr, CHAT_ROLES))}"
        )
    content = message.get("content")
    calls = message.get("tool_calls")
    if calls is not None and role != "assistant":
        raise ValueError(
            f"{where} is a {role} message with 'tool_calls'; only an assistant message makes "
            "tool calls (give the calls to the assistant turn, or drop them)"
        )
    if content is None:
        if role != "assistant":
            raise ValueError(
                f"{where}: the {role} message has no 'content'; give its text, as in "
                f"{{'role': {role!r}, 'content': '...'}} ('' for none)"
            )
        if not calls:
            raise ValueError(
                f"{where} is an assistant message with neither 'content' nor 'tool_calls'; "
                "give its text ('' for none) or the tool calls it made"
            )
    elif isinstance(content, list | tuple):
        _check_parts(content, where)
    elif not isinstance(content, str):
        raise TypeError(
            f"{where} has 'content' of type {type(content).__name__}; give the text as a "
            "str, or a list of content parts such as [{'type': 'text', 'text': '...'}]"
        )
    if calls is not None:
        _check_calls(calls, where)
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(
                f"{where}: the tool message has no 'tool_call_id'; a tool message answers one "
                "tool call, so set its 'tool_call_id' to that call's 'id' in the assistant "
                "message before it"
            )


def _check_parts(parts: list[Any] | tuple[Any, ...], where: str) -> None:
    """The content parts of a message: each a dict with its `type`, text parts with
    their text and image parts with their URL, the two every server reads."""
    if not parts:
        raise ValueError(
            f"{where} has an empty list of content parts; give its text ('' for none) or at "
            "least one part such as {'type': 'text', 'text': '...'}"
        )
    for i, part in enumerate(parts):
        if not isinstance(part, Mapping):
            raise TypeError(
                f"{where}: content part {i} is a {type(part).__name__}, expected a dict such "
                "as {'type': 'text', 'text': '...'}"
            )
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError(
                f"{where}: content part {i} has no 'type'; give it one, as in "
                "{'type': 'text', 'text': '...'} or {'type': 'image_url', 'image_url': "
                "{'url': '...'}}"
            )
        if kind == "text" and not isinstance(part.get("text"), str):
            raise ValueError(
                f"{where}: content part {i} is a text part; give its 'text' as a str, as in "
                "{'type': 'text', 'text': '...'}"
            )
        if kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else None
            if not isinstance(url, str) or not url:
                raise ValueError(
                    f"{where}: content part {i} is an image part without its URL; give it as "
                    "{'type': 'image_url', 'image_url': {'url': 'https://... or "
                    "data:image/png;base64,...'}}"
                )


def _check_calls(calls: Any, where: str) -> None:
    """An assistant message's tool calls, in the wire format the next request sends."""
    if not isinstance(calls, list | tuple):
        raise TypeError(
            f"{where} has 'tool_calls' of type {type(calls).__name__}; give a list of "
            "calls such as [{'id': 'call_1', 'type': 'function', 'function': {'name': "
            "'add', 'arguments': '{\"a\": 1}'}}]"
        )
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ValueError(
                f"{where}: tool call {i} needs 'function': {{'name': ..., 'arguments': ...}}, "
                f"got {call!r:.120}"
            )
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(
                f"{where}: tool call {i} has no 'id'; give each call one (such as 'call_1'), "
                "which the tool message answering it names as its 'tool_call_id'"
            )
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            raise TypeError(
                f"{where}: tool call {i}'s arguments are a {type(arguments).__name__}; give "
                "them as JSON text, as the protocol carries them: json.dumps(arguments)"
            )
