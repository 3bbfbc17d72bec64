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
