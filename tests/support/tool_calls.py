"""An assistant's tool call in the OpenAI wire format, as tests write model turns."""

from __future__ import annotations

import json
from typing import Any


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    """One entry of an assistant message's `tool_calls`, its arguments as JSON text."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def calling(*calls: dict[str, Any]) -> dict[str, Any]:
    """An assistant message that only calls tools."""
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


CALL = {"function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}


def call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    """A tool call as a model may send it: arguments as given when text (malformed
    JSON included), JSON otherwise, and an id only when `call_id` is given."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    out: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": raw}}
    if call_id is not None:
        out["id"] = call_id
    return out
