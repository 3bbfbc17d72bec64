"""A scripted model for tests that play against the loopback server: turns in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vfgym.types import Messages


def scripted(*turns: Any) -> Callable[[Messages], Any]:
    """A model that plays `turns` in order, one per assistant turn of the conversation
    (the last one again once they run out); a list is a turn of tool calls."""

    def policy(messages: Messages) -> Any:
        done = sum(1 for m in messages if m["role"] == "assistant")
        turn = turns[min(done, len(turns) - 1)]
        if isinstance(turn, list):
            return {"role": "assistant", "content": None, "tool_calls": turn}
        return turn

    return policy


def say_ok(messages: Messages) -> str:
    """A model that always answers "ok" (" ok" to a text prompt)."""
    return " ok" if isinstance(messages, str) else "ok"


def numbered_policy(messages: list[dict[str, Any]], request: dict[str, Any]) -> str:
    """Answers "m0", "m1", ... by the number of assistant turns so far."""
    return f"m{sum(1 for m in messages if m['role'] == 'assistant')}"


def echo(messages):
    """Answers a chat with the last message reversed, a text prompt with its upper case."""
    if isinstance(messages, str):
        return messages.upper()
    return f"echo: {messages[-1]['content'][::-1]}"
