"""Rubric: turns a finished rollout into a reward and per-function metrics.

The reward is the weighted sum of the reward functions' values. Scoring runs
on the event loop that thousands of rollouts share, so sync reward functions
run in a worker thread (all of one rollout's in a single hop) and async ones
are awaited, concurrently when `parallelize_scoring` is on. Sync code that scores
one rollout at a time with sync functions only (the Gym adapter) has no loop to
protect: `score_rollout_sync` calls them in the caller's thread instead.

A reward function that raises, or returns something that is not a number, is
an error, not a zero: its metric is NaN, the error is appended to
`state["reward_errors"]`, the metric `reward_errors` counts them for the
rollout, and the reward is the weighted sum of the functions that succeeded.

NaN is a metric's "no value" throughout: a failed function, an errored rollout,
and a metric a rollout lacks in a batch's columns (`score_rollouts`, `generate`).
A mean over a column should leave NaN out (`numpy.nanmean`), as vfgym's summaries do.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import numbers
import time
from collections.abc import Iterable, Mapping, Sized
from math import isfinite
from typing import Any

from vfgym.engine._async import run_sync
from vfgym.engine.offload import Offloader, OffloadMode
from vfgym.errors import SyncScoringUnavailable
from vfgym.parsers.parser import Parser
from vfgym.rubrics.reward_call import STANDARD_ARGS, RewardSpec, call_specs, to_reward
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


def rollout_args(state: State) -> tuple[Any, ...]:
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


def _plain_score(reward: Any, metrics: Any) -> tuple[float, dict[str, float]]:
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


def _checked_weight(name: str, weight: Any) -> float:
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


def _func_list(funcs: Any) -> list[RewardFunc]:
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


def _weight_list(weights: Any) -> list[Any]:
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


def _takes_state_alone(spec: RewardSpec) -> bool:
    """True when calling `spec.func(state)` is exactly what `spec.call` would do."""
    return spec.pick is not None and spec.params == ("state",)


class Rubric:
    """A set of weighted reward functions and the machinery to call them.

    Reward functions receive only the arguments they declare, out of `prompt`,
    `completion`, `answer`, `state`, `task`, `info`, `example_id`, `parser`,
    the rubric's `class_objects` and any extra keyword given to `score_rollout`;
    one with `**kwargs` receives them all.
    """

    def __init__(
        self,
        funcs: list[RewardFunc] | None = None,
        weights: list[float] | None = None,
        parser: Parser | None = None,
        parallelize_scoring: bool = True,
        *,
        class_objects: Mapping[str, Any] | None = None,
        offload_sync: OffloadMode = "auto",
        **kwargs: Any,
    ) -> None:
        """`offload_sync` says where sync reward functions run (see `vfgym.engine.offload`):
        "auto" inline while they stay quick and in a worker thread once calls turn
        slow, "always" in a thread, "never" inline."""
        if kwargs:
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword argument(s) {sorted(kwargs)}. "
                "To offer extra objects to reward functions pass "
                "class_objects={'name': value}; a subclass keeps its own attributes itself."
            )
        self.logger = logging.getLogger(f"vfgym.rubrics.{type(self).__name__}")
        self.parser: Parser = parser if parser is not None else Parser()
        self.parallelize_scoring = parallelize_scoring
        self.offloader = Offloader(offload_sync)
        self.reward_funcs: list[RewardFunc] = []
        self.reward_weights: list[float] = []
        self._specs: dict[int, RewardSpec] = {}
        self._spec_list: tuple[list[RewardFunc], list[RewardSpec]] = ([], [])
        # The offloader key of the reward functions when all are sync, None when one is
        # async (kept by _specs_of; no functions: all sync).
        self._sync_key: tuple[Any, ...] | None = ()
        self._plan: _SyncPlan | None = None
        # The last weights `_checked_weights` saw, and their checked floats.
        self._weights_seen: tuple[list[Any], list[float]] = ([], [])
        # `_sync_plan` reads the lists themselves unless a subclass says what they are.
        self._own_lists = (
            type(self).get_reward_funcs is Rubric.get_reward_funcs
            and type(self).get_reward_weights is Rubric.get_reward_weights
        )
        self._warned: set[str] = set()
        self.class_objects: dict[str, Any] = {"parser": self.parser}
        for name, value in (class_objects or {}).items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"class_objects keys must be parameter names, got {name!r}")
            if name in STANDARD_ARGS:
                raise ValueError(
                    f"class_objects may not replace the standard argument {name!r}"
                    + ("; pass parser=... instead" if name == "parser" else "")
                )
            self.class_objects[name] = value
        funcs = _func_list(funcs)
        if weights is None:
            weights = [1.0] * len(funcs)
        weights = _weight_list(weights)
        if len(weights) != len(funcs):
            raise ValueError(
                f"{len(funcs)} reward function(s) but {len(weights)} weight(s): give one weight "
                "per function, or none for 1.0 each"
            )
        for func, weight in zip(funcs, weights, strict=True):
            self.add_reward_func(func, weight)

    # -- the functions -------------------------------------------------------

    def _spec_for(self, func: RewardFunc) -> RewardSpec:
        """The cached spec of `func`, inspecting it if it reached the list another way."""
        spec = self._specs.get(id(func))
        if spec is None or spec.func is not func:
            spec = self._specs[id(func)] = RewardSpec.of(func)
        return spec

    def get_reward_func_names(self) -> list[str]:
        """Metric names of the reward functions, in order."""
        return [self._spec_for(f).name for f in self.get_reward_funcs()]

    def get_reward_funcs(self) -> list[RewardFunc]:
        """The reward functions, in order."""
        return self.reward_funcs

    def get_reward_weights(self) -> list[float]:
        """The weights, one per reward function."""
        return self.reward_weights

    def add_reward_func(self, func: RewardFunc, weight: float = 1.0) -> None:
        """Add a reward function; its parameters are read now, once."""
        spec = RewardSpec.of(func)
        weight = _checked_weight(spec.name, weight)
        if spec.name == REWARD_ERRORS or spec.name in self.get_reward_func_names():
            raise ValueError(
                f"a reward function named {spec.name!r} is already in this rubric (or the name "
                "is reserved); metrics are keyed by name, so give it a distinct __name__"
            )
        self._specs[id(func)] = spec
        self.reward_funcs.append(func)
        self.reward_weights.append(weight)

    # -- calling them --------------------------------------------------------

    def _offer(
        self,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str,
        info: Info | None,
        example_id: int | None,
        kwargs: Mapping[str, Any],
    ) -> dict[str, Any]:
        available: dict[str, Any] = {
            "prompt": prompt,
            "completion": completion,
            "answer": answer,
            "state": state,
            "task": task,
            "info": info if info is not None else {},
            "example_id": example_id,
            **self.class_objects,
        }
        if kwargs:
            available.update(kwargs)
        return available

    async def _settle(self, outcome: Any) -> Any:
        """Await a sync function's awaitable result; return the value or the exception."""
        if not inspect.isawaitable(outcome):
            return outcome
        try:
            return await outcome
        except Exception as exc:
            return exc

    async def _run_sync(self, specs: list[RewardSpec], available: dict[str, Any]) -> list[Any]:
        # One hop (or none) for the rollout's sync functions together; the verdict
        # belongs to this group of functions.
        key = tuple(spec.key for spec in specs)
        outcomes = await self.offloader.call_as(key, call_specs, specs, available)
        return [await self._settle(o) for o in outcomes]

    async def _run_async(self, spec: RewardSpec, available: dict[str, Any]) -> Any:
        try:
            return await spec.call(available)
        except Exception as exc:
            return exc

    async def _run_all(self, specs: list[RewardSpec], available: dict[str, Any]) -> list[Any]:
        """Every function's value or exception, in the order of `specs`."""
        outcomes: list[Any] = [None] * len(specs)
        if self.parallelize_scoring:
            sync_idx = [i for i, s in enumerate(specs) if not s.is_async]
            async_idx = [i for i, s in enumerate(specs) if s.is_async]
            jobs = [self._run_async(specs[i], available) for i in async_idx]
            if sync_idx:
                jobs.append(self._run_sync([specs[i] for i in sync_idx], available))
            # gather makes a Task per job; a lone job is simply awaited.
            results = [await jobs[0]] if len(jobs) == 1 else await asyncio.gather(*jobs)
            for i, result in zip(async_idx, results, strict=False):
                outcomes[i] = result
            if sync_idx:
                for i, result in zip(sync_idx, results[-1], strict=True):
                    outcomes[i] = result
            return outcomes
        # In order: consecutive sync functions share one thread hop.
        i = 0
        while i < len(specs):
            if specs[i].is_async:
                outcomes[i] = await self._run_async(specs[i], available)
                i += 1
                continue
            j = i
            while j < len(specs) and not specs[j].is_async:
                j += 1
            outcomes[i:j] = await self._run_sync(specs[i:j], available)
            i = j
        return outcomes

    def _record_error(self, state: State, name: str, exc: BaseException) -> None:
        errors = state.get(REWARD_ERRORS)
        if not isinstance(errors, list):
            errors = state[REWARD_ERRORS] = []
        errors.append(error_entry(name, exc))
        # One warning per function; the rest at debug level, or a broken function
        # would print ten thousand lines in a large run.
        level = logging.DEBUG if name in self._warned else logging.WARNING
        self._warned.add(name)
        self.logger.log(level, "reward function %r failed: %s: %s", name, type(exc).__name__, exc)

    async def call_reward_func(
        self,
        func: RewardFunc,
        prompt: Messages,
        completion: Messages,
        answer: Any,
        state: State,
        task: str = "default",
        info: Info | None = None,
        example_id: int | None = None,
        **kwargs: Any,
    ) -> float:
        """Call one reward function as the rubric would; NaN (and a recorded error) on failure."""
        if state is None:  # as in score_rollout: somewhere to record an error
            state = {}
        spec = self._spec_for(func)
        available = self._offer(prompt, completion, answer, state, task, info, example_id, kwargs)
        [outcome] = await self._run_all([spec], available)
        try:
            if isinstance(outcome, Exception):
                raise outcome
            return to_reward(spec.name, outcome)
        except Exception as exc:
            self._record_error(state, spec.name, exc)
            return math.nan

    # -- scoring -------------------------------------------------------------

    async def score_rollout(
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
        """Score one rollout: reward = sum of weight x value over the functions that succeeded.

        Extra keywords are offered to the reward functions. With
        `apply_weights=False` every weight counts as 1.
        """
        started = time.perf_counter()
        if state is None:
            state = {}
        specs, weights = self._specs_and_weights()
        available = self._offer(prompt, completion, answer, state, task, info, example_id, kwargs)
        sync_key = self._sync_key
        if sync_key is not None:  # every function sync (the usual case): one call, one verdict
            outcomes = await self.offloader.call_as(sync_key, call_specs, specs, available)
            for i, outcome in enumerate(outcomes):
                if hasattr(outcome, "__await__"):
                    outcomes[i] = await self._settle(outcome)
        else:
            outcomes = await self._run_all(specs, available)
        return self._tally(state, specs, weights, outcomes, apply_weights, started)

    def can_score_sync(self) -> bool:
        """True when `score_rollout_sync` can score for this rubric.

        That is when the rubric scores with `Rubric`'s own `score_rollout` (a
        subclass that overrides it scores its own way) and every reward function
        is sync.
        """
        if type(self).score_rollout is not Rubric.score_rollout:
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
        available = None
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
        if type(self).score_values_sync is not Rubric.score_values_sync:
            return _plain_score(*self.score_values_sync(*rollout_args(state)))
        started = time.perf_counter()
        plan = self._sync_plan()  # raises before anything is called
        available = None
        if plan.offers:
            available = self._offer(*rollout_args(state), {})
        return self._run_plan(plan, state, available, True, started)

    def _run_plan(
        self,
        plan: _SyncPlan,
        state: State,
        available: dict[str, Any] | None,
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
            if type(self).score_rollout is not Rubric.score_rollout:
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

    def _as_reward(self, name: str, value: Any) -> float:
        """A function's result (or the exception it raised) other than a float, as a
        reward: an exception is raised, a number made a float, anything else refused.
        Only the sync path meets an awaitable (the loop's path settles them first):
        it is awaited here."""
        if hasattr(value, "__await__"):  # a sync function that returned an awaitable
            value = run_sync(self._settle(value))
        if isinstance(value, Exception):
            raise value
        return to_reward(name, value)

    def _specs_and_weights(self) -> tuple[list[RewardSpec], list[float]]:
        funcs = self.get_reward_funcs()
        weights = self.get_reward_weights()
        if len(weights) != len(funcs):
            raise ValueError(
                f"{type(self).__name__} has {len(funcs)} reward function(s) but {len(weights)} "
                "weight(s); add functions with add_reward_func(func, weight)"
            )
        specs = self._specs_of(funcs)
        return specs, self._checked_weights(specs, weights)

    def _checked_weights(self, specs: list[RewardSpec], weights: list[Any]) -> list[float]:
        """`weights` as floats, checked as `add_reward_func` checks them.

        `reward_weights` is a public list that may be changed after construction; a
        weight set there that is NaN would make every reward NaN (read as a failed
        model server), and a str would fail deep in the sum. Checked once per change.
        """
        seen, checked = self._weights_seen
        if seen == weights:
            return checked
        checked = [_checked_weight(s.name, w) for s, w in zip(specs, weights, strict=True)]
        self._weights_seen = (list(weights), checked)
        return checked

    def _specs_of(self, funcs: list[RewardFunc]) -> list[RewardSpec]:
        """The specs of `funcs` in order, kept while the list holds the same functions."""
        known, specs = self._spec_list
        if known != funcs:  # list equality compares the functions by identity first
            specs = [self._spec_for(f) for f in funcs]
            self._spec_list = (list(funcs), specs)
            self._sync_key = None if any(s.is_async for s in specs) else tuple(s.key for s in specs)
        return specs

    def _tally(
        self,
        state: State,
        specs: list[RewardSpec],
        weights: list[float],
        outcomes: list[Any],
        apply_weights: bool,
        started: float,
    ) -> RolloutScore:
        """The score from each function's value or exception; failures are recorded in `state`."""
        reward, metrics = self._totals(state, specs, weights, outcomes, apply_weights, started)
        return RolloutScore(reward=reward, metrics=metrics)

    def _totals(
        self,
        state: State,
        specs: list[RewardSpec],
        weights: list[float],
        outcomes: list[Any],
        apply_weights: bool,
        started: float,
    ) -> tuple[float, dict[str, float]]:
        """`_tally`'s reward and metrics, before they become a `RolloutScore`."""
        reward = 0.0
        errors = 0
        metrics: dict[str, float] = {}
        for spec, weight, outcome in zip(specs, weights, outcomes, strict=True):
            try:
                value = (
                    outcome
                    if type(outcome) is float and isfinite(outcome)
                    else self._as_reward(spec.name, outcome)
                )
            except Exception as exc:
                self._record_error(state, spec.name, exc)
                metrics[spec.name] = math.nan
                errors += 1
                continue
            metrics[spec.name] = value
            reward += value * weight if apply_weights else value
        metrics[REWARD_ERRORS] = float(errors)
        add_scoring_time(state, (time.perf_counter() - started) * 1000.0)
        return reward, metrics

    async def score_group(self, states: list[State], **kwargs: Any) -> None:
        """Hook for comparisons across a batch (ranking, voting), run before per-rollout scoring.

        Override it to write group-level results into each rollout's state,
        where reward functions can read them. The override may be a plain method
        or a coroutine. The default does nothing.

        It receives the states (errored rollouts included) and, as keywords, the
        per-rollout columns `prompts`, `completions`, `answers`, `tasks`, `infos`
        and `example_ids`. `score_rollouts` runs it once over its whole batch.
        `generate` / `evaluate` run it over each example's group (its
        `rollouts_per_example` rollouts) once all of them have finished, then score
        and record that group's rollouts together; a rubric whose hook raises
        leaves its group's rollouts errored (reward NaN). See `has_group_hook`.
        """
        return None

    def has_group_hook(self) -> bool:
        """True when `score_group` does something: this rubric's class overrides it.

        `generate` scores the rollouts of one example together when it does, and
        each rollout alone the moment it ends when it does not (a group would only
        delay the results). A rubric made of others (`RubricGroup`, an `EnvGroup`'s)
        answers for its members too.
        """
        return type(self).score_group is not Rubric.score_group

    async def score_rollouts(
        self,
        prompts: list[Messages],
        completions: list[Messages],
        answers: list[Any],
        states: list[State],
        tasks: list[str],
        infos: list[Info],
        example_ids: list[int] | None = None,
        max_concurrent: int = -1,
        use_tqdm: bool = False,
        apply_weights: bool = True,
        **kwargs: Any,
    ) -> RolloutScores:
        """Score a batch of rollouts concurrently (at most `max_concurrent` at once if > 0).

        A rollout whose state has an `error` is not scored: its reward and every
        metric are NaN, as `generate` gives it, so re-scoring never turns a failed
        rollout into a wrong answer. A metric that some rollouts have and another
        lacks (an EnvGroup's tasks have their own rubrics) is NaN in that one, as in
        `generate`: no value, rather than a 0.0 it never scored. The `score_group`
        hook still receives the whole batch, errored rollouts included.
        """
        n = len(prompts)
        if tasks is None:
            tasks = ["default"] * n
        if infos is None:
            infos = [{} for _ in range(n)]
        if example_ids is None:
            example_ids = list(range(n))
        columns = {
            "completions": completions,
            "answers": answers,
            "states": states,
            "tasks": tasks,
            "infos": infos,
            "example_ids": example_ids,
        }
        wrong = {k: len(v) for k, v in columns.items() if len(v) != n}
        if wrong:
            raise ValueError(f"score_rollouts got {n} prompts but lengths {wrong}; align them")
        await self.offloader.call(
            self.score_group,
            states,
            prompts=prompts,
            completions=completions,
            answers=answers,
            tasks=tasks,
            infos=infos,
            example_ids=example_ids,
            **kwargs,
        )
        extra = dict(kwargs)
        if not apply_weights:
            extra["apply_weights"] = False
        semaphore = asyncio.Semaphore(max_concurrent) if max_concurrent > 0 else None

        async def score_one(i: int) -> RolloutScore:
            async with semaphore if semaphore is not None else contextlib.nullcontext():
                return await self.score_rollout(
                    prompts[i],
                    completions[i],
                    answers[i],
                    states[i],
                    tasks[i],
                    infos[i],
                    example_ids[i],
                    **extra,
                )

        errored = errored_rows(states)
        skip = set(errored)
        unscored = RolloutScore(reward=math.nan, metrics={})  # `blank_rows` fills it in
        todo = [i for i in range(n) if i not in skip]
        jobs = [score_one(i) for i in todo]
        if use_tqdm:
            from tqdm.asyncio import tqdm_asyncio

            done = await tqdm_asyncio.gather(*jobs, total=len(jobs), desc=f"Scoring {n} rollouts")
        else:
            done = await asyncio.gather(*jobs)
        scores = [unscored] * n
        for i, score in zip(todo, done, strict=True):
            scores[i] = score
        # NaN once the columns are built: every metric of an errored row, not only
        # those a row lacks.
        names = [*self.get_reward_func_names(), REWARD_ERRORS]
        return blank_rows(scores_to_columns(scores, names), errored)
