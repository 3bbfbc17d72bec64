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
import math
import time
from math import isfinite
from typing import Any

from vfgym.rubrics.reward_call import RewardSpec, call_specs, to_reward
from vfgym.rubrics.scores import (
    NO_VALUE,
    REWARD_ERRORS,
    add_scoring_time,
    blank_rows,
    error_entry,
    errored_rows,
    rollout_args,
    scores_to_columns,
)
from vfgym.rubrics.sync_scoring import SyncScoring
from vfgym.types import Info, Messages, RewardFunc, RolloutScore, RolloutScores, State


class Rubric(SyncScoring):
    """A set of weighted reward functions and the machinery to call them.

    Reward functions receive only the arguments they declare, out of `prompt`,
    `completion`, `answer`, `state`, `task`, `info`, `example_id`, `parser`,
    the rubric's `class_objects` and any extra keyword given to `score_rollout`;
    one with `**kwargs` receives them all.
    """

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

    def _overrides_score_rollout(self) -> bool:
        return type(self).score_rollout is not Rubric.score_rollout

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


__all__ = [
    "NO_VALUE",
    "REWARD_ERRORS",
    "Rubric",
    "add_scoring_time",
    "blank_rows",
    "error_entry",
    "errored_rows",
    "rollout_args",
    "scores_to_columns",
]
