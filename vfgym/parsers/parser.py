"""The base parser: text in, answer out, with a format reward to match.

A parser sits between the model's raw text and the reward functions, so that a
rubric compares answers rather than prose. The base class returns text as is
(after an optional `extract_fn`), and gives every subclass the helpers for
picking messages of one role out of a conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from vfgym.parsers._chat import content_text, message_role, message_text
from vfgym.types import ChatMessage, Messages


def identity(text: str) -> str:
    """The default `extract_fn`: a named function rather than a lambda, so parsers pickle."""
    return text


class Parser:
    """Turns model output into the answer a reward function compares.

    `extract_fn` post-processes the text `parse` selected (for example
    `extract_boxed_answer`), which lets one parser class serve many answer formats.
    """

    def __init__(self, extract_fn: Callable[[str], Any] = identity) -> None:
        if not callable(extract_fn):
            raise TypeError(
                f"extract_fn must be a callable taking the text and returning the answer, "
                f"got {type(extract_fn).__name__}"
            )
        self.logger = logging.getLogger(f"vfgym.parsers.{type(self).__name__}")
        self.extract_fn = extract_fn

    def parse(self, text: str) -> Any:
        """Parse one piece of model text.

        `text` may also be a message's `content` as the openai client gives it: None
        (a turn that only called tools) reads as "", content parts as their text.
        """
        return self.extract_fn(content_text(text))

    def get_assistant_messages(self, completion: list[ChatMessage]) -> list[ChatMessage]:
        """The assistant turns of a conversation, in order."""
        return [m for m in completion if message_role(m) == "assistant"]

    def get_system_messages(self, completion: list[ChatMessage]) -> list[ChatMessage]:
        """The system messages of a conversation, in order."""
        return [m for m in completion if message_role(m) == "system"]

    def get_user_messages(self, completion: list[ChatMessage]) -> list[ChatMessage]:
        """The user turns of a conversation, in order."""
        return [m for m in completion if message_role(m) == "user"]

    def get_tool_messages(self, completion: list[ChatMessage]) -> list[ChatMessage]:
        """The tool results of a conversation, in order."""
        return [m for m in completion if message_role(m) == "tool"]

    def parse_answer(self, completion: Messages) -> str | None:
        """The answer of a finished rollout.

        For a string completion that is the parsed string; for a chat it is the
        parsed text of the last assistant turn (None when the model never spoke).
        """
        if isinstance(completion, str):
            return self.parse(completion)
        assistant = self.get_assistant_messages(completion)
        if not assistant:
            return None
        return self.parse(message_text(assistant[-1]))

    def format_reward_func(self, completion: Messages, **kwargs: Any) -> float:
        """Every output is well formed for the plain parser."""
        return 1.0

    def get_format_reward_func(self) -> Callable[..., float]:
        """A reward function scoring how well the model kept the parser's format.

        It is a bound method (named `format_reward_func`), so it pickles with
        the parser and needs no closure.
        """
        return self.format_reward_func
