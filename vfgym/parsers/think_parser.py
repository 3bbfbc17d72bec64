"""Parsers for models that reason inside <think> ... </think> before answering.

`ThinkParser` is strict: text without a closing </think> has no answer, which
is right for a model that must always think first. `MaybeThinkParser` drops a
think block when there is one and keeps the text otherwise, which suits models
whose server may already have removed the reasoning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vfgym.parsers._chat import content_text, is_tool_call_only, message_text
from vfgym.parsers.parser import Parser, identity
from vfgym.types import Messages

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def follows_think_format(text: str) -> bool:
    """Exactly one think block, at the very start, followed by a non-empty answer."""
    stripped = text.strip()
    return (
        stripped.startswith(THINK_OPEN)
        and stripped.count(THINK_OPEN) == 1
        and stripped.count(THINK_CLOSE) == 1
        and bool(stripped.split(THINK_CLOSE, 1)[1].strip())
    )


class ThinkParser(Parser):
    """The answer is whatever follows the last </think>; without one there is no answer."""

    def __init__(self, extract_fn: Callable[[str], Any] = identity) -> None:
        super().__init__(extract_fn=extract_fn)

    def parse(self, text: str) -> Any:
        """The text after </think>, stripped and passed to `extract_fn` ("" if never closed).

        None content (a tool-call turn) and content parts are read as `Parser.parse` reads them.
        """
        text = content_text(text)
        if THINK_CLOSE not in text:
            return self.extract_fn("")
        return self.extract_fn(text.rsplit(THINK_CLOSE, 1)[1].strip())

    def format_reward_func(self, completion: Messages, **kwargs: Any) -> float:
        """The share of assistant turns that think once, first, then answer.

        Tool-call-only turns are skipped; a rollout with nothing to score gets 0.
        """
        if isinstance(completion, str):
            return float(follows_think_format(completion))
        texts = [
            message_text(m)
            for m in self.get_assistant_messages(completion)
            if not is_tool_call_only(m)
        ]
        if not texts:
            return 0.0
        return sum(follows_think_format(t) for t in texts) / len(texts)


class MaybeThinkParser(Parser):
    """Drops a leading think block if there is one; otherwise keeps the text."""

    def __init__(self, extract_fn: Callable[[str], Any] = identity) -> None:
        super().__init__(extract_fn=extract_fn)

    def parse(self, text: str) -> Any:
        """The text after the last </think> (all of it when there is none), stripped."""
        return self.extract_fn(content_text(text).rsplit(THINK_CLOSE, 1)[-1].strip())
