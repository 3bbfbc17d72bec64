"""What a rubric's scoring produces, and the checks on what it is given.

Split from `rubric.py` so that the pieces other layers share (the `reward_errors`
record, scoring time in `state["timing"]`, a batch's NaN-filled columns) and the
checks on a rubric's `funcs`/`weights` live apart from the machinery that calls
reward functions: the Gym adapter, `RubricGroup` and the games use these without
any of that machinery.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sized
from math import isfinite
from typing import Any

from vfgym.types import Info, Messages, RewardFunc, RolloutScore, RolloutScores, State

REWARD_ERRORS = "reward_errors"
"""Metric counting a rollout's failed reward functions; also the state key listing them."""


def error_entry(name: str, exc: BaseException) -> dict[str, str]:
    """The record of one failed reward function, as stored in `state["reward_errors"]`."""
    return {"func": name, "type": type(exc).__name__, "message": str(exc)}


def add_scoring_time(state: State, elapsed_ms: float) -> None:
    """Record scoring time in `state["timing"]` and add it to the rollout's total."""
    timing = state.get("timing")
    if not isinstance(timing, dict):
        timing = state["timing"] = {}
    timing["scoring_ms"] = elapsed_ms
    timing["total_ms"] = timing.get("total_ms", 0.0) + elapsed_ms


def rollout_args(
    state: State,
) -> tuple[Messages, Messages, Any, State, str, Info | None, int | None]:
    """A finished rollout's State as `score_rollout`'s positional arguments."""
    return (
        state["prompt"],
        state["completion"],
        state["answer"],
        state,
        state.get("task", "default"),
        state.get("info"),
        state.get("example_id"),
    )


def errored_rows(states: list[State]) -> list[int]:
    """Indices of the rollouts whose state records an `error` (generation or a hook failed)."""
    return [i for i, s in enumerate(states) if isinstance(s, dict) and s.get("error")]


def blank_rows(scores: RolloutScores, rows: list[int]) -> RolloutScores:
    """Set the reward and every metric of `rows` to NaN, in place; returns `scores`."""
    for i in rows:
        scores.reward[i] = math.nan
        for column in scores.metrics.values():
            column[i] = math.nan
    return scores


#: The value of a metric a rollout has none for: its reward function failed, the
#: rollout errored, or the metric is not its rubric's (an EnvGroup's other tasks).
NO_VALUE = math.nan


def scores_to_columns(scores: list[RolloutScore], names: Iterable[str]) -> RolloutScores:
    """Turn per-rollout scores into columns; a metric one rollout lacks is NaN there.

    NaN, not 0.0: a 0.0 would be a score the rollout never got and would pull the
    metric's mean down; NaN is the "no value" that failed reward functions and errored
    rollouts already have, which `generate` gives too and vfgym's summaries leave out
    (reporting how many values each mean covers). Average a column with a NaN-aware
    mean (`numpy.nanmean`).
    """
    keys = list(dict.fromkeys(names))
    for score in scores:
        keys.extend(k for k in score.metrics if k not in keys)
    return RolloutScores(
        reward=[s.reward for s in scores],
        metrics={k: [s.metrics.get(k, NO_VALUE) for s in scores] for k in keys},
    )


def plain_score(reward: Any, metrics: Any) -> tuple[float, dict[str, float]]:
    """(reward, metrics) as `score_rollout` gives them: a float and a plain dict of
    floats, checked by `RolloutScore`.

    A subclass's own `score_values_sync` may return any mapping (a read-only view);
    handed out as it is, the Gym adapter's `info["metrics"]` could not be edited,
    deep-copied or sent to a vector env's worker, where the async path's could.
    """
    if type(metrics) is dict and type(reward) is float:
        if all(type(v) is float for v in metrics.values()):
            return reward, metrics
    score = RolloutScore(reward=reward, metrics=metrics)
    return score.reward, score.metrics


def checked_weight(name: str, weight: Any) -> float:
    """`weight` as a float: any finite real number (numpy's and `Fraction` too), not a bool.

    A bool is refused because `True` as a weight is almost always a misplaced
    argument; NaN or infinity would make every reward NaN (or infinite).
    """
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise TypeError(f"weight of {name!r} must be a number, got {weight!r}")
    value = float(weight)
    if not isfinite(value):
        raise ValueError(f"weight of {name!r} must be a finite number, got {weight!r}")
    return value


def as_func_list(funcs: Any) -> list[RewardFunc]:
    """`funcs` as a list; a lone function (or any non-list) is refused, saying how to pass it."""
    if funcs is None:
        return []
    if (
        callable(funcs)
        or isinstance(funcs, str | bytes | Mapping)
        or not isinstance(funcs, Iterable)
    ):
        name = getattr(funcs, "__name__", None) or type(funcs).__name__
        raise TypeError(
            f"funcs must be a list of reward functions, got {type(funcs).__name__} {name!r}; "
            f"for one function write funcs=[{name}]"
        )
    return list(funcs)


def as_weight_list(weights: Any) -> list[Any]:
    """`weights` as a list; one number, or something with no length (a generator), is
    refused: weights pair up with the functions one by one."""
    if isinstance(weights, str | bytes | Mapping) or not (
        isinstance(weights, Sized) and isinstance(weights, Iterable)
    ):
        raise TypeError(
            f"weights must be a list of numbers, one per reward function, got {weights!r}; "
            "for one function write weights=[1.0]"
        )
    return list(weights)
