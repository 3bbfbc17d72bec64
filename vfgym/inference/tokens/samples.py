"""Where a rollout's token ids split into exact samples, read from the server's own ids.

A response that carries `prompt_token_ids` (vLLM's `return_token_ids`, in either
mode) says what the model was really conditioned on. Turn k continues the same
sample when its prompt ids start with turn k-1's prompt ids and sampled ids;
otherwise the server saw another history than the one the sample holds (chat mode
re-rendered a reply's text into other tokens, or the template rewrote the past),
and turn k starts a new sample. Each sample is then exact: its ids up to every
turn are the ids the server generated that turn from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _field(obj: Any, key: str) -> Any:
    """`obj.key`, an extra field of an openai model, or a dict key (read-back State)."""
    value = getattr(obj, key, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(key)
    if value is None and isinstance(obj, dict):
        value = obj.get(key)
    return value


def server_ids(response: Any) -> tuple[list[int], list[int]] | None:
    """(prompt ids, sampled ids) the server reported for `response`, or None when it
    reported either not (a server without `return_token_ids`)."""
    choices = _field(response, "choices")
    if not choices:
        return None
    choice = choices[0]
    prompt = _field(response, "prompt_token_ids") or _field(choice, "prompt_token_ids")
    sampled = _field(choice, "token_ids")
    if prompt is None or sampled is None:
        return None
    return [int(t) for t in prompt], [int(t) for t in sampled]


def exact_samples(responses: Sequence[Any]) -> list[list[int]] | None:
    """The rollout's turns grouped into exact samples (lists of response indices), or
    None when some response does not carry the server's ids."""
    samples: list[list[int]] = []
    sequence: list[int] = []
    for index, response in enumerate(responses):
        ids = server_ids(response)
        if ids is None:
            return None
        prompt, sampled = ids
        if samples and prompt[: len(sequence)] == sequence:
            samples[-1].append(index)
        else:
            samples.append([index])
        sequence = prompt + sampled
    return samples


__all__ = ["exact_samples", "server_ids"]
