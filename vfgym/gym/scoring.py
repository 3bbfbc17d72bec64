"""Scoring a finished episode from sync code without an event loop.

`Rubric.score_rollout` sends sync reward functions to a worker thread so they never
stall an event loop shared by thousands of rollouts. A Gym `step()` in plain sync
code has no loop to protect, and a loop plus a thread hop costs about 250 µs per
episode — far more than a game's whole episode. For a plain `Rubric` whose reward
functions are all sync, `InlineScorer` calls them right here, with the same
arguments, weights, metrics and error records as `score_rollout`; anything else
(async functions, rubric subclasses with their own scoring) goes through the
rubric itself.
"""

from __future__ import annotations

import inspect
import math
import time
from typing import Any

from vfgym._async import is_async_callable, run_sync
from vfgym.rubrics import REWARD_ERRORS, Rubric
from vfgym.rubrics.reward_call import RewardSpec, call_specs, to_reward
from vfgym.rubrics.rubric import add_scoring_time, error_entry
from vfgym.types import RolloutScore, State


class InlineScorer:
    """`rubric.score_rollout(...)` for sync reward functions, called in this thread."""

    def __init__(self, rubric: Rubric) -> None:
        self.rubric = rubric
        self._key: tuple[Any, ...] = ()
        self._specs: list[RewardSpec] = []

    @staticmethod
    def supports(rubric: Rubric) -> bool:
        """True when `rubric` scores with `Rubric.score_rollout` and only sync functions."""
        return type(rubric).score_rollout is Rubric.score_rollout and not any(
            is_async_callable(f) for f in rubric.get_reward_funcs()
        )

    def _current_specs(self) -> list[RewardSpec]:
        funcs = self.rubric.get_reward_funcs()
        key = tuple(id(f) for f in funcs)
        if key != self._key:  # functions were added or removed since the last episode
            self._specs = [RewardSpec.of(f) for f in funcs]
            self._key = key
        return self._specs

    def score(self, state: State) -> RolloutScore:
        """Score the finished episode in `state`, as `score_rollout` would."""
        started = time.perf_counter()
        rubric = self.rubric
        specs = self._current_specs()
        weights = rubric.get_reward_weights()
        if len(weights) != len(specs):
            raise ValueError(
                f"{type(rubric).__name__} has {len(specs)} reward function(s) but "
                f"{len(weights)} weight(s); add functions with add_reward_func(func, weight)"
            )
        available: dict[str, Any] = {
            "prompt": state["prompt"],
            "completion": state["completion"],
            "answer": state["answer"],
            "state": state,
            "task": state.get("task", "default"),
            "info": state.get("info") or {},
            "example_id": state.get("example_id"),
            **rubric.class_objects,
        }
        outcomes = call_specs(specs, available)
        reward = 0.0
        errors = 0
        metrics: dict[str, float] = {}
        for spec, weight, outcome in zip(specs, weights, outcomes, strict=True):
            try:
                if inspect.isawaitable(outcome):  # a sync function that returned a coroutine
                    outcome = run_sync(_settle(outcome))
                if isinstance(outcome, Exception):
                    raise outcome
                value = to_reward(spec.name, outcome)
            except Exception as exc:
                self._record_error(state, spec.name, exc)
                metrics[spec.name] = math.nan
                errors += 1
                continue
            metrics[spec.name] = value
            reward += value * weight
        metrics[REWARD_ERRORS] = float(errors)
        add_scoring_time(state, (time.perf_counter() - started) * 1000.0)
        return RolloutScore(reward=reward, metrics=metrics)

    def _record_error(self, state: State, name: str, exc: Exception) -> None:
        errors = state.get(REWARD_ERRORS)
        if not isinstance(errors, list):
            errors = state[REWARD_ERRORS] = []
        errors.append(error_entry(name, exc))
        self.rubric.logger.warning(
            "reward function %r failed: %s: %s", name, type(exc).__name__, exc
        )


async def _settle(awaitable: Any) -> Any:
    try:
        return await awaitable
    except Exception as exc:
        return exc


__all__ = ["InlineScorer"]
