"""Scoring without an event loop: a rubric's sync reward functions called in the caller's thread.

Sync code that scores one rollout at a time with sync functions only (the Gym
adapter, at every episode's end) has no loop to protect, and a loop plus a thread
hop would cost more than the functions. `SyncScoring` keeps a plan of the calls
(`_SyncPlan`), rebuilt only when the functions or weights change, and runs it in
one pass. Split from `rubric.py`, whose `Rubric` adds the event-loop path on top.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from math import isfinite
from types import MappingProxyType
from typing import Any

from vfgym.errors import SyncScoringUnavailable
from vfgym.rubrics.reward_call import RewardSpec
from vfgym.rubrics.reward_funcs import RewardFuncs
from vfgym.rubrics.scores import REWARD_ERRORS, add_scoring_time, plain_score, rollout_args
from vfgym.types import Info, Messages, RewardFunc, RolloutScore, State

#: The arguments offered when no function takes more than the State: none, since each
#: is then called with the State alone (read-only, shared by every call).
NOTHING_OFFERED: Mapping[str, Any] = MappingProxyType({})


class _SyncPlan:
    """How `score_values_sync` calls a rubric's functions: one step per function,
    `(name, func, weight, spec)`, with `spec` None when the function takes `state`
    alone and is called with it directly (no dict of arguments built at all)."""

    __slots__ = ("funcs", "offers", "steps", "weights")

    def __init__(
        self,
        funcs: list[RewardFunc],
        weights: list[float],
        steps: tuple[tuple[str, RewardFunc, float, RewardSpec | None], ...],
    ) -> None:
        self.funcs = funcs
        self.weights = weights
        self.steps = steps
        #: Whether a function needs `_offer`'s dict of arguments.
        self.offers = any(spec is not None for _, _, _, spec in steps)

    @classmethod
    def of(
        cls, funcs: list[RewardFunc], weights: list[float], specs: list[RewardSpec]
    ) -> _SyncPlan:
        steps = tuple(
            (spec.name, spec.func, weight, None if _takes_state_alone(spec) else spec)
            for spec, weight in zip(specs, weights, strict=True)
        )
        # Copies: the rubric's own lists may grow, and the plan must notice.
        return cls(list(funcs), list(weights), steps)


def _takes_state_alone(spec: RewardSpec) -> bool:
    """True when calling `spec.func(state)` is exactly what `spec.call` would do."""
    return spec.pick is not None and spec.params == ("state",)


class SyncScoring(RewardFuncs):
    """The sync scoring path of `Rubric` (`score_rollout_sync` and its kin)."""

    _plan: _SyncPlan | None = None

    def _overrides_score_rollout(self) -> bool:
        """True when this rubric's class scores its own way (overrides `score_rollout`),
        so its functions cannot be called directly; `Rubric` answers."""
        return True

    def can_score_sync(self) -> bool:
        """True when `score_rollout_sync` can score for this rubric.

        That is when the rubric scores with `Rubric`'s own `score_rollout` (a
        subclass that overrides it scores its own way) and every reward function
        is sync.
        """
        if self._overrides_score_rollout():
            return False
        return self._async_names(self._specs_of(self.get_reward_funcs())) is None

    @staticmethod
    def _async_names(specs: list[RewardSpec]) -> list[str] | None:
        names = [s.name for s in specs if s.is_async]
        return names or None

    def score_rollout_sync(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        *,
        apply_weights: bool = True,
        **kwargs: Any,
    ) -> RolloutScore:
        """`score_rollout` in the caller's thread, with no event loop and no worker thread.

        For sync code that scores one rollout at a time, such as a Gym `step()`:
        there is no shared event loop to protect, and a loop plus a thread hop
        would cost more than the reward functions themselves. The arguments,
        weights, metrics and error records are exactly those of `score_rollout`.
        Needs `can_score_sync()`; otherwise it raises `SyncScoringUnavailable`
        before calling anything, and the rollout must be scored with
        `await score_rollout(...)`.
        """
        reward, metrics = self.score_values_sync(
            prompt,
            completion,
            answer,
            state,
            task,
            info,
            example_id,
            apply_weights=apply_weights,
            **kwargs,
        )
        return RolloutScore(reward=reward, metrics=metrics)

    def score_values_sync(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        *,
        apply_weights: bool = True,
        **kwargs: Any,
    ) -> tuple[float, dict[str, float]]:
        """`score_rollout_sync`'s reward and metrics as a plain pair.

        For callers that score at every episode's end in a tight loop (the Gym
        adapter): building the `RolloutScore` model costs about as much as calling
        a game's five reward functions.
        """
        started = time.perf_counter()
        plan = self._sync_plan()  # raises before anything is called
        if state is None:
            state = {}
        available: Mapping[str, Any] = NOTHING_OFFERED
        if plan.offers:
            available = self._offer(
                prompt, completion, answer, state, task, info, example_id, kwargs
            )
        return self._run_plan(plan, state, available, apply_weights, started)

    def score_state_sync(self, state: State) -> tuple[float, dict[str, float]]:
        """`score_values_sync` for a finished rollout given by its State alone: the
        other arguments (prompt, completion, answer, task, info, example id) are read
        from it, and only when a reward function takes more than the State. The Gym
        adapter scores every episode's end this way."""
        if type(self).score_values_sync is not SyncScoring.score_values_sync:
            return plain_score(*self.score_values_sync(*rollout_args(state)))
        started = time.perf_counter()
        plan = self._sync_plan()  # raises before anything is called
        available: Mapping[str, Any] = NOTHING_OFFERED
        if plan.offers:
            available = self._offer(*rollout_args(state), {})
        return self._run_plan(plan, state, available, True, started)

    def _run_plan(
        self,
        plan: _SyncPlan,
        state: State,
        available: Mapping[str, Any],
        apply_weights: bool,
        started: float,
    ) -> tuple[float, dict[str, float]]:
        """Call, check, record and sum each function in turn, in one pass. A float (the
        usual value) costs one type check; anything else takes `_as_reward`."""
        reward = 0.0
        errors = 0
        metrics: dict[str, float] = {}
        for name, func, weight, spec in plan.steps:
            try:
                value = func(state) if spec is None else spec.call(available)
                if type(value) is not float or not isfinite(value):
                    value = self._as_reward(name, value)
            except Exception as exc:
                self._record_error(state, name, exc)
                metrics[name] = math.nan
                errors += 1
                continue
            metrics[name] = value
            reward += value * weight if apply_weights else value
        metrics[REWARD_ERRORS] = float(errors)
        add_scoring_time(state, (time.perf_counter() - started) * 1000.0)
        return reward, metrics

    def _sync_plan(self) -> _SyncPlan:
        """How `score_values_sync` calls the functions, kept while they and their
        weights stay the same; raises `SyncScoringUnavailable` when it cannot."""
        if self._own_lists:  # (no calls: this runs at every Gym episode's end)
            funcs, weights = self.reward_funcs, self.reward_weights
        else:
            funcs, weights = self.get_reward_funcs(), self.get_reward_weights()
        plan = self._plan
        if plan is None or plan.funcs != funcs or plan.weights != weights:
            if self._overrides_score_rollout():
                raise SyncScoringUnavailable(
                    f"{type(self).__name__} overrides score_rollout, so it cannot score "
                    "without an event loop; use `await rubric.score_rollout(...)` instead"
                )
            specs, weights = self._specs_and_weights()  # (checks the weights' count)
            names = self._async_names(specs)
            if names is not None:
                raise SyncScoringUnavailable(
                    f"{type(self).__name__} has async reward function(s) {names}, so it "
                    "cannot score without an event loop; use `await rubric.score_rollout(...)` "
                    "instead"
                )
            plan = self._plan = _SyncPlan.of(funcs, weights, specs)
        return plan
