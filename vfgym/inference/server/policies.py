"""Ready-made policies for tests and demos.

`by_turn` is the one multi-turn tests want: it picks the reply from how many
assistant turns the conversation already has, so each rollout gets the same
script no matter how many rollouts run concurrently against one server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

Reply = str | dict[str, Any]


def echo(messages: Any) -> str:
    """Answer with the last message's text (the prompt itself for a text completion)."""
    if isinstance(messages, str):
        return messages
    content = messages[-1].get("content") if messages else ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def constant(reply: Reply) -> Callable[[Any], Reply]:
    """A policy that always gives `reply` (text or an assistant message dict)."""

    def policy(messages: Any) -> Reply:
        return reply

    return policy


def by_turn(replies: Sequence[Reply], *, then: Reply | None = None) -> Callable[[Any], Reply]:
    """A chat policy that gives `replies[k]` on the conversation's k-th assistant turn.

    After the script runs out it gives `then`, or fails (an HTTP 500 the client
    sees) when `then` is None, because a test that runs past its script is a bug.
    """
    if isinstance(replies, str | bytes | Mapping):
        # list() of one reply would be its characters (or a dict's keys), each a turn
        raise TypeError(
            f"by_turn takes a list of replies, one per turn, got a single "
            f"{type(replies).__name__}; wrap it: by_turn([reply])"
        )
    script = list(replies)
    if not script:
        raise ValueError("by_turn needs at least one reply")

    def policy(messages: Any) -> Reply:
        if isinstance(messages, str):
            raise TypeError("by_turn counts assistant messages, so it serves chat requests only")
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < len(script):
            return script[turn]
        if then is not None:
            return then
        raise IndexError(
            f"the script has {len(script)} replies but the conversation asks for turn {turn + 1}; "
            "add replies or pass then=..."
        )

    return policy
