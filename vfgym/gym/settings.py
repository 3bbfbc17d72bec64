"""The settings a `GymEnv` is made with: checked once, read-only afterwards.

The spaces and the step path are built from them when the env is made, so each bad
value is refused there with what to pass instead, and a value assigned later is
refused too (`made_with`) rather than silently ignored or half applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import gymnasium as gym
import numpy as np

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.types import State


def made_with(name: str) -> property:
    """A setting of `GymEnv.__init__` that reads back but cannot be assigned later.

    The spaces and the step path are built from it when the env is made, so a new
    value assigned afterwards (`env.unwrapped.per_step_reward = True`, or a vector
    env's `set_attr`) would be silently ignored, or half applied; the error says how
    to get an env with that setting instead. Reads go through `attrgetter` (C code).
    """

    def refuse(self: object, value: Any) -> None:
        raise AttributeError(
            f"GymEnv.{name} is fixed when the env is made (its spaces and step path are "
            f"built from it), so it cannot be set afterwards; make a new env with it: "
            f"gym.make(id, {name}={value!r}) or GymEnv(env, {name}={value!r})"
        )

    return property(attrgetter(f"_{name}"), refuse, doc=f"`{name}` as the env was made with.")


def check_token_counter(count_tokens: Any) -> None:
    """Refuse a `count_tokens` that is not a function (at make time and when set later)."""
    if count_tokens is not None and not callable(count_tokens):
        raise TypeError(
            "count_tokens must be a function from a turn's text to its token count, "
            f"not {type(count_tokens).__name__}"
        )


def check_settings(
    env: object,
    *,
    observation_mode: str,
    per_step_reward: object,
    render_mode: str | None,
    render_modes: Sequence[str],
    dataset: str,
    max_text_length: object,
    count_tokens: object,
) -> tuple[bool, Callable[[State], Any] | None, list[dict[str, Any]]]:
    """Refuse a `GymEnv` setting that cannot work, saying what to pass instead, before
    the env is built; warn about a token budget nothing would enforce.

    Returns `per_step_reward` as a bool, the environment's `step_reward` hook (None
    when it has none) and the dataset rows episodes start from.
    """
    if not isinstance(env, MultiTurnEnv):
        raise TypeError(
            f"GymEnv wraps a vfgym MultiTurnEnv (or SingleTurnEnv, ToolEnv), not "
            f"{type(env).__name__}; build one with vfgym.load_environment(name)"
        )
    if observation_mode not in ("text", "messages"):
        raise ValueError(f"observation_mode must be 'text' or 'messages', not {observation_mode!r}")
    if observation_mode == "messages" and env.message_type != "chat":
        raise ValueError(
            "observation_mode='messages' needs a chat environment; this one uses "
            "message_type='completion', so use observation_mode='text'"
        )
    if render_mode is not None and render_mode not in render_modes:
        raise ValueError(f"render_mode must be None, 'ansi' or 'human', not {render_mode!r}")
    if dataset not in ("eval", "train"):
        raise ValueError(f"dataset must be 'eval' or 'train', not {dataset!r}")
    if isinstance(max_text_length, bool) or not isinstance(max_text_length, int):
        raise TypeError(f"max_text_length must be an int, not {max_text_length!r}")
    if max_text_length < 1:
        raise ValueError(f"max_text_length must be at least 1, not {max_text_length}")
    check_token_counter(count_tokens)
    if count_tokens is None and env.rollout_token_budget is not None:
        gym.logger.warn(
            f"{type(env).__name__} has rollout_token_budget={env.rollout_token_budget}, "
            "but a Gym action carries no token count: pass GymEnv(..., count_tokens="
            "lambda text: len(tokenizer.encode(text))) (gym.make takes it too) to "
            "enforce the budget; max_turns still applies"
        )
    if isinstance(per_step_reward, np.bool_):
        per_step_reward = bool(per_step_reward)
    if not isinstance(per_step_reward, bool):  # "no" would turn it on
        raise TypeError(f"per_step_reward must be True or False, not {per_step_reward!r}")
    step_reward = getattr(env, "step_reward", None)
    if per_step_reward and not callable(step_reward):
        raise ValueError(
            f"per_step_reward=True needs the environment to define step_reward(state) -> "
            f"float, and {type(env).__name__} does not; leave per_step_reward off to get "
            "the episodic reward at the end"
        )
    rows = env.get_dataset() if dataset == "train" else env.get_eval_dataset()
    if not rows:
        raise ValueError(f"{type(env).__name__} has no {dataset} rows to start episodes from")
    return per_step_reward, step_reward, rows
