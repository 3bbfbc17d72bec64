"""What a `GymEnv` reset or step returns besides the reward: the observation and
the `info` dict.

A layer of `GymEnv` (see `vfgym.gym.env`). Text observations are the messages'
contents, cleaned and cut to the space's bound; in "messages" mode each message is
cleaned and the whole list made to fit the JSON an `AsyncVectorEnv`'s shared memory
carries. A prompt's text is remembered, since every reset shows one of the dataset's
prompts. `info` carries the episode's `StateView`, a vector worker's one with the
delta shipping of `vfgym.gym.shipping`.
"""

from __future__ import annotations

import json
from operator import itemgetter
from typing import Any, cast

from vfgym.gym.episode import Observation
from vfgym.gym.rendering import Rendering
from vfgym.gym.shipping import Conversation, new_outbox
from vfgym.gym.spaces import MessagesSpace
from vfgym.gym.state_view import StateView
from vfgym.gym.text import clean_strings, clean_text, content_text, fit_text, observation_text
from vfgym.types import ChatMessage, Messages, State

#: How many prompts' observation texts a GymEnv remembers (see `_observe_prompt`).
PROMPT_TEXTS_KEPT = 4096


#: A message's content, read in C (`_observe_prompt`).
_CONTENT = itemgetter("content")


class Observing(Rendering):
    """Observations and infos, for resets and steps."""

    __slots__ = ()

    def _started(self, state: State, ready: Any) -> tuple[Observation, dict[str, Any]]:
        """What `reset` returns, once `setup_state` gave back `ready`."""
        if ready is not None and ready is not state:
            state.update(ready)
        # One view per episode: it reads the live State, so a new one per step would
        # show nothing more, while a new one per episode keeps showing its own.
        self._view = StateView(state)
        if self._human:
            self._show_turn(None, state["prompt"])
        if self._ship:
            self._episodes += 1
            stream = None if self._outbox is None else self._outbox.stream
            self._outbox = new_outbox(stream, self._episodes)
        return self._observe_prompt(state["prompt"]), self._info(state)

    def _observe_prompt(self, prompt: Messages) -> Observation:
        """`_observe(prompt)`, remembered by the prompt's texts in text mode: every reset
        shows one of the dataset's prompts, and cleaning a long system prompt each time
        costs more than the rest of a reset."""
        if self._observation_mode != "text" or type(prompt) is not list:
            return self._observe(prompt)
        try:
            key = tuple(map(_CONTENT, prompt))
            text = self._prompt_texts.get(key)
        except (KeyError, TypeError):  # no content, or content parts (unhashable)
            return self._observe(prompt)
        if text is None:
            if len(self._prompt_texts) >= PROMPT_TEXTS_KEPT:
                self._prompt_texts.clear()
            text = self._prompt_texts[key] = self._observe(prompt)
        return text

    def _observe(self, messages: Messages) -> Observation:
        if self._observation_mode == "text":
            return observation_text(messages, self._max_text_length)
        limit = self._max_text_length
        out: list[Any] = []
        # One or two messages of a role and a content (a step's usual reply) fit the
        # space's JSON bound by construction: 2 * (2 * limit + 64) < 4 * limit + 4096.
        plain = len(messages) <= 2
        # (a list: "messages" mode is only made for chat environments)
        for message in cast("list[ChatMessage]", messages):
            copied = dict(message)
            content = copied.get("content")
            if content is not None:
                if type(content) is not str:  # content parts become their text, as in text mode
                    content = content_text(content)
                copied["content"] = fit_text(clean_text(content), limit)
            if len(copied) > 2:  # tool calls, a tool_call_id, a name: their text too
                plain = False
                for key, value in copied.items():
                    if key != "content":
                        copied[key] = clean_strings(value)
            out.append(copied)
        if not plain:
            # (a MessagesSpace: this is "messages" mode)
            capacity = cast(MessagesSpace, self.observation_space).shared_memory_chars
            if _json_size_bound(out) > capacity:
                _fit_json(out, capacity)
        return out

    def _info(self, state: State) -> dict[str, Any]:
        messages = state["prompt"] + state["completion"]  # a new list (or str) every call
        if self._outbox is None:
            return {"state": self._view, "messages": messages, "turn": state["turn"]}
        view = StateView(state, self._outbox)
        if type(messages) is list:
            messages = Conversation(messages, view)
        return {"state": view, "messages": messages, "turn": state["turn"]}


def _fit_json(messages: list[dict[str, Any]], capacity: int) -> None:
    """Cut the longest contents of `messages` (a messages-mode observation) until its
    JSON form, what an `AsyncVectorEnv`'s shared memory carries, fits `capacity`
    characters; each content already fits the text bound, but their number does not."""
    size = len(json.dumps(messages, ensure_ascii=False))
    while size > capacity:
        longest = max(messages, key=lambda m: len(m.get("content") or ""))
        content = longest.get("content") or ""
        if not content:
            raise ValueError(
                f"an observation of {len(messages)} messages needs {size} characters as "
                f"JSON even with no content, more than the {capacity} its space allows; "
                "make the env with a larger max_text_length"
            )
        # (8 more: the note that says where the cut is adds an escaped newline)
        longest["content"] = fit_text(content, max(0, len(content) - (size - capacity) - 8))
        size = len(json.dumps(messages, ensure_ascii=False))


def _json_size_bound(messages: list[dict[str, Any]]) -> int:
    """An upper bound on the JSON length of a messages-mode observation, cheap to get.

    Cleaned text escapes at most to twice its length (tab, newline, carriage return,
    quote, backslash; no other control characters are left, and `ensure_ascii=False`
    keeps the rest as it is). A message's role and keys take under 64 more; the
    rarer other entries (`tool_call_id`, `tool_calls`) are measured."""
    bound = 2
    for message in messages:
        content = message.get("content")
        bound += 64 + (2 * len(content) if isinstance(content, str) else 0)
        if len(message) > 2 or ("role" not in message or "content" not in message):
            rest = {k: v for k, v in message.items() if k not in ("role", "content")}
            bound += len(json.dumps(rest, ensure_ascii=False, default=str))
    return bound
