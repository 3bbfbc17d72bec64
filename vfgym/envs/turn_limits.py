"""How an episode ends: its stop reasons, the turn limit, and the token budget per turn.

Split from `multiturn_env.py`, whose loop asks these each turn: how many tokens
the next turn may have (`turn_sampling_args`), and why the episode ended, with a
last reply the server cut at its token limit told as truncation (`final_stop`).
"""

from __future__ import annotations

from typing import Any

from vfgym.inference.overflow import cut_by_length
from vfgym.types import ModelResponse, SamplingArgs, State

#: Why an episode ended. "completed" is a natural end (Gymnasium's `terminated`);
#: the others cut it short (`truncated`), except "error", which is neither. "length"
#: is an episode whose last model reply the server cut at its token limit.
STOP_REASONS = ("completed", "max_turns", "token_budget", "context_length", "length", "error")
#: The stop reasons that are truncations.
TRUNCATING = frozenset({"max_turns", "token_budget", "context_length", "length"})
#: The sampling args that limit a turn's tokens (the newer name first).
_MAX_TOKENS_KEYS = ("max_completion_tokens", "max_tokens")


def turn_limit(max_turns: Any) -> int:
    """`max_turns` as the int the loop compares on every turn; None (like 0 or a
    negative number) means no limit.

    Checked once here: a None or a "5" that reached the turn check would end
    every rollout as an error, one model turn in.
    """
    if max_turns is None:
        return -1
    if isinstance(max_turns, float) and max_turns.is_integer():
        return int(max_turns)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int):
        raise TypeError(
            f"max_turns must be a whole number of turns (0, a negative number or None "
            f"for no limit), not {max_turns!r}"
        )
    return max_turns


def turn_sampling_args(
    budget: int | None, state: State, sampling_args: SamplingArgs
) -> SamplingArgs:
    """Clamp the turn's max tokens to what is left of the rollout's token budget."""
    if budget is None:
        return sampling_args
    left = budget - state["completion_tokens"]
    # Every limit the turn sets is clamped; a key present with None sets none.
    limits = [k for k in _MAX_TOKENS_KEYS if sampling_args.get(k) is not None]
    if not limits:
        key = "max_completion_tokens" if "max_completion_tokens" in sampling_args else "max_tokens"
        return {**sampling_args, key: left}
    over = {key: left for key in limits if sampling_args[key] > left}
    return {**sampling_args, **over} if over else sampling_args


def final_stop(budget: int | None, state: State, stop: str, last_response: ModelResponse) -> str:
    """The stop reason `stop`, with a natural end whose last model reply was cut
    at the server's token limit told as truncation: that reply ends mid-answer,
    and a trainer masking truncated completions must see it. A turn limit or
    context overflow already truncates; when the token budget lowered that turn's
    max tokens, the budget is why it was cut. Cut turns before the last one do not
    end the episode (the environment answers them as any other turn).
    """
    if stop != "completed" or last_response is None or not cut_by_length(last_response):
        return stop
    if budget is not None and state["completion_tokens"] >= budget:
        return "token_budget"
    return "length"
