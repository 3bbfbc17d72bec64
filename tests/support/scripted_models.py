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
