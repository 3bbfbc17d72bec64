"""What the adapter takes in: the model's turn as an action, and fresh copies of row data.

An action is checked completely before anything in the episode changes, so a bad one
raises with a message that says what a valid action looks like and loses nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from vfgym.engine.data import fresh_copy
from vfgym.types import ChatMessage

#: What one tool call of an action looks like, quoted by the errors about one.
VALID_CALL = (
    "{'id': 'call_1', 'type': 'function', 'function': {'name': 'add', 'arguments': '{\"a\": 1}'}}"
)

#: What an action that is a message looks like, quoted by the errors about one.
VALID_MESSAGE = "{'role': 'assistant', 'content': '...', 'tool_calls': [...]}"


def model_turn(action: Any, *, chat: bool) -> ChatMessage | str:
    """The action as the message to record (for a chat env, an assistant message dict).

    Accepts the model's text, an assistant message dict (with `tool_calls`), or an
    openai `ChatCompletionMessage`; raises TypeError/ValueError for anything else,
    before the episode changes. The message comes back in the OpenAI wire format (see
    `checked_message`), so the recorded conversation can be sent to a chat server as
    it is, and shares nothing with `action`, so later edits to either do not leak.
    """
    if isinstance(action, str):
        return {"role": "assistant", "content": action} if chat else action
    if not chat:
        raise TypeError(
            "this environment is completion-style (message_type='completion'); the "
            f"action must be the model's text as a str, not {type(action).__name__}"
        )
    message = checked_message(action)
    if message["content"] is None:
        message["content"] = ""  # strict servers want the key, and ToolEnv reads text
    return fresh_copy(message)  # type: ignore[no-any-return]


def checked_message(action: Any) -> dict[str, Any]:
    """`action` as an assistant message in the OpenAI wire format, or a TypeError/ValueError
    saying what is wrong with it and what a valid one looks like.

    One check for both `model_turn` and `ModelTurnSpace.contains`, so what the action
    space holds and what `step` takes cannot drift apart. Only the shape is checked:
    an unknown tool name or arguments that are not valid JSON are the environment's to
    answer, as a tool error the model reads, like in a rollout.

    Normalised: `tool_calls` becomes a list of dicts (an empty one is dropped, which
    OpenAI refuses); a call without an `id` gets a `call_...` one made from its
    position, name and arguments (see `_call_id`; two calls given one id are refused,
    since their replies could not be told apart), a missing `type`
    is "function", and `arguments` given as a dict becomes the JSON string the
    protocol carries (missing: "{}").
    Other keys (`name`, `refusal`, `reasoning_content`, even `usage`) are kept:
    dropping them would silently lose what the caller recorded, and OpenAI ignores
    keys it does not know; a stricter server's client must filter them. Nested values
    are shared with `action`; `model_turn` copies them.
    """
    fields = _as_mapping(action)
    role = fields.get("role", "assistant")
    if role != "assistant":
        raise ValueError(
            f"an action is the model's turn, so its role must be 'assistant', not {role!r}"
        )
    content = fields.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(
            f"the action's 'content' must be a str or None, not {type(content).__name__}"
        )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update((k, v) for k, v in fields.items() if k not in _OWN_KEYS)
    calls = _checked_calls(fields.get("tool_calls"))
    if calls:
        message["tool_calls"] = calls
    elif content is None:
        raise ValueError(
            "the action has neither 'content' nor 'tool_calls'; give the model's text, "
            f"its tool calls, or both: {VALID_MESSAGE}"
        )
    return message


#: The keys `checked_message` writes itself; the others it copies as they are.
_OWN_KEYS = frozenset({"role", "content", "tool_calls"})

#: The error for a whole chat completion passed as the action, the likeliest mix-up.
_COMPLETION_GIVEN = (
    "the action is a whole chat completion; pass the model's turn, "
    "completion.choices[0].message (or its text, completion.choices[0].message.content)"
)


def _as_mapping(action: Any) -> Mapping[str, Any]:
    """`action` as a mapping: openai message objects are dumped; a whole completion,
    the likeliest mix-up, gets an error that says which part to pass."""
    if isinstance(action, Mapping):
        if "choices" in action and "content" not in action and "tool_calls" not in action:
            raise TypeError(_COMPLETION_GIVEN)
        return action
    if hasattr(action, "choices"):
        raise TypeError(_COMPLETION_GIVEN)
    dump = getattr(action, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)  # type: ignore[no-any-return]
    raise TypeError(
        "an action is the model's turn: a str, or an assistant message dict like "
        f"{VALID_MESSAGE}; got {type(action).__name__}"
    )


def _checked_calls(calls: Any) -> list[dict[str, Any]]:
    """The tool calls of an action, each checked and in wire format (None: none)."""
    if calls is None:
        return []
    if not isinstance(calls, list | tuple):
        raise TypeError(
            f"the action's 'tool_calls' must be a list of tool calls like [{VALID_CALL}], "
            f"not {type(calls).__name__}"
        )
    checked = [_checked_call(call, index) for index, call in enumerate(calls)]
    first: dict[str, int] = {}
    for index, call in enumerate(checked):
        earlier = first.setdefault(call["id"], index)
        if earlier != index:
            # A tool reply names the call it answers by its id: two calls with one id
            # would get replies no one (model or policy) could tell apart.
            raise ValueError(
                _bad_call(
                    f"tool_calls[{index}]['id'] {call['id']!r} is the id of "
                    f"tool_calls[{earlier}] too; give each call of a turn its own id, or "
                    "leave 'id' out and one is made"
                )
            )
    return checked


def _checked_call(call: Any, index: int) -> dict[str, Any]:
    """One tool call in wire format; the error names the call and its bad part."""
    where = f"tool_calls[{index}]"
    if not isinstance(call, Mapping):
        dump = getattr(call, "model_dump", None)
        if not callable(dump):
            raise TypeError(_bad_call(f"{where} must be a dict, not {type(call).__name__}"))
        call = dump(exclude_none=True)
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise TypeError(
            _bad_call(
                f"{where}['function'] must be a dict with 'name' and 'arguments', not "
                f"{type(function).__name__}"
            )
        )
    _require_str(function.get("name"), f"{where}['function']['name']")
    _require_str(call.get("id"), f"{where}['id']", optional=True)
    kind = call.get("type", "function")
    if kind != "function":
        raise ValueError(_bad_call(f"{where}['type'] must be 'function', not {kind!r}"))
    arguments = _arguments_text(function.get("arguments"), where)
    checked = {
        "id": call.get("id") or _call_id(index, function["name"], arguments),
        "type": "function",
        "function": {**function, "arguments": arguments},
    }
    checked.update((k, v) for k, v in call.items() if k not in checked)
    return checked


def _call_id(index: int, name: str, arguments: str) -> str:
    """An id for a call given without one: unique among the calls of one turn (which
    is all a tool reply's `tool_call_id` must tell apart) and a function of the call
    alone, so the same seed and actions replay the same episode, ids included."""
    digest = hashlib.sha256(f"{index}\0{name}\0{arguments}".encode()).hexdigest()
    return f"call_{digest[:24]}"


def _bad_call(problem: str) -> str:
    """The error message for a malformed tool call: the problem, then a valid call."""
    return f"{problem}; a tool call looks like {VALID_CALL}"


def _require_str(value: Any, where: str, *, optional: bool = False) -> None:
    """Raise unless `value` is a str (or None, when `optional`)."""
    if isinstance(value, str) or (optional and value is None):
        return
    wanted = "a str or missing" if optional else "a str"
    raise TypeError(_bad_call(f"{where} must be {wanted}, not {type(value).__name__}"))


def _arguments_text(arguments: Any, where: str) -> str:
    """A call's arguments as the JSON text the protocol carries."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    if not isinstance(arguments, Mapping):
        raise TypeError(
            _bad_call(
                f"{where}['function']['arguments'] must be a JSON object as a str (or a "
                f"dict), not {type(arguments).__name__}"
            )
        )
    try:
        return json.dumps(dict(arguments), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            _bad_call(
                f"{where}['function']['arguments'] cannot be written as JSON ({exc}); give "
                "JSON values (str, numbers, bools, None, lists, dicts)"
            )
        ) from None


__all__ = ["checked_message", "model_turn"]
