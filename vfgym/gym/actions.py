"""What the adapter takes in: the model's turn as an action, and fresh copies of row data.

An action is checked completely before anything in the episode changes, so a bad one
raises with a message that says what a valid action looks like and loses nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vfgym.messages import normalize_message
from vfgym.types import ChatMessage


def model_turn(action: Any, *, chat: bool) -> ChatMessage | str:
    """The action as the message to record (for a chat env, an assistant message dict).

    Accepts the model's text, an assistant message dict (with `tool_calls`), or an
    openai `ChatCompletionMessage`; raises TypeError/ValueError for anything else.
    """
    if isinstance(action, str):
        return {"role": "assistant", "content": action} if chat else action
    if not chat:
        raise TypeError(
            "this environment is completion-style (message_type='completion'); the "
            f"action must be the model's text as a str, not {type(action).__name__}"
        )
    if not isinstance(action, Mapping) and hasattr(action, "model_dump"):
        action = normalize_message(action)  # an openai ChatCompletionMessage
    if not isinstance(action, Mapping):
        raise TypeError(
            "an action is the model's turn: a str, or an assistant message dict like "
            "{'role': 'assistant', 'content': '...', 'tool_calls': [...]}; got "
            f"{type(action).__name__}"
        )
    role = action.get("role", "assistant")
    if role != "assistant":
        raise ValueError(
            f"an action is the model's turn, so its role must be 'assistant', not {role!r}"
        )
    content = action.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(
            f"the action's 'content' must be a str or None, not {type(content).__name__}"
        )
    calls = action.get("tool_calls")
    if calls is not None and not isinstance(calls, list | tuple):
        raise TypeError(
            f"the action's 'tool_calls' must be a list of tool calls, not {type(calls).__name__}"
        )
    if content is None and not calls:
        raise ValueError("the action has neither 'content' nor 'tool_calls'")
    message: dict[str, Any] = {**action, "role": "assistant", "content": content or ""}
    if calls is not None:
        message["tool_calls"] = [
            copy.deepcopy(dict(c)) if isinstance(c, Mapping) else c for c in calls
        ]
    return message  # type: ignore[return-value]


#: Types `fresh_copy` hands back as they are (immutable).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def fresh_copy(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars), several times faster than
    `copy.deepcopy` on the small `info` dicts every reset copies; other objects still
    go through `copy.deepcopy`."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k: v if type(v) in _SCALARS else fresh_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else fresh_copy(v) for v in value]
    return copy.deepcopy(value)


__all__ = ["fresh_copy", "model_turn"]
