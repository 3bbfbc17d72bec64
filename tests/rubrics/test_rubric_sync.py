"""Sync reward functions: sync scoring (`score_values_sync`, `score_state_sync`) gives what
scoring on the event loop gives, and on the loop sync functions run inline while quick
and in one thread hop once they are not."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest

from vfgym.rubrics import (
    REWARD_ERRORS,
    Rubric,
)
from vfgym.rubrics.rubric import rollout_args
from vfgym.types import Messages, State

PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


async def score(rubric: Rubric, state: dict | None = None, **kwargs: Any) -> Any:
    state = {} if state is None else state
    return await rubric.score_rollout(
        PROMPT, COMPLETION, "4", state, task="math", info={"level": 1}, example_id=7, **kwargs
    )


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submits = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        self.submits += 1
        return super().submit(fn, *args, **kwargs)


SAY_HI = [{"role": "user", "content": "Say hi."}]


class FrozenMetricsRubric(Rubric):
    """A rubric whose own `score_values_sync` hands back a read-only view of its metrics."""

    def score_values_sync(self, *args: Any, **kwargs: Any) -> tuple[float, Mapping[str, float]]:
        reward, metrics = super().score_values_sync(*args, **kwargs)
        return reward, MappingProxyType(metrics)


def said_hi(completion: Messages) -> float:
    return 1.0 if "hi" in str(completion) else 0.0


def raises() -> float:
    raise ValueError("cannot score")


def batch(states: list[State]) -> dict[str, Any]:
    """`score_rollouts`' columns for `states`, one plain rollout each."""
    n = len(states)
    return {
        "prompts": ["p"] * n,
        "completions": ["4"] * n,
        "answers": ["4"] * n,
        "states": states,
        "tasks": ["default"] * n,
        "infos": [{} for _ in range(n)],
    }


@dataclass
class Contains:
    """A reward function as a dataclass (eq=True makes its instances unhashable)."""

    needle: str

    def __call__(self, completion: Any) -> float:
        return 1.0 if self.needle in str(completion) else 0.0


def test_score_values_sync_is_score_rollout_sync_as_a_pair() -> None:
    def half(completion):
        return 0.5

    def broken(answer):
        raise ValueError("no")

    rubric = Rubric([half, broken], weights=[2.0, 1.0])
    state_a: dict = {}
    state_b: dict = {}
    reward, metrics = rubric.score_values_sync(PROMPT, COMPLETION, "4", state_a)
    verdict = rubric.score_rollout_sync(PROMPT, COMPLETION, "4", state_b)
    assert reward == verdict.reward == 1.0
    assert metrics.keys() == verdict.metrics.keys()
    assert math.isnan(metrics["broken"]) and metrics["reward_errors"] == 1.0
    assert state_a["reward_errors"] == state_b["reward_errors"]


def test_functions_of_state_alone_score_as_they_do_on_the_event_loop() -> None:
    """`score_values_sync` calls a function of `state` alone directly, with no dict of
    arguments built: every kind of result must count exactly as in `score_rollout`."""

    def as_float(state):
        return 0.5

    def as_int(state):
        return 2

    def as_bool(state):
        return True

    def raises(state):
        raise ValueError("no board")

    def as_none(state):
        return None

    async def later() -> float:
        return 0.25

    def deferred(state):  # a sync function handing back an awaitable
        return later()

    def hands_back_an_error(state):
        return KeyError("handed back")

    funcs = [as_float, as_int, as_bool, raises, as_none, deferred, hands_back_an_error]
    rubric = Rubric(funcs, weights=[1.0, 2.0, 4.0, 1.0, 1.0, 8.0, 1.0])
    for apply_weights, expected in ((True, 0.5 + 4 + 4 + 2), (False, 0.5 + 2 + 1 + 0.25)):
        state_a: dict = {}
        state_b: dict = {}
        reward, metrics = rubric.score_values_sync(
            PROMPT, COMPLETION, "4", state_a, apply_weights=apply_weights
        )
        reference = asyncio.run(score(rubric, state_b, apply_weights=apply_weights))
        assert reward == reference.reward == expected
        assert list(metrics) == list(reference.metrics)
        for name, value in metrics.items():
            assert type(value) is float
            same = value == reference.metrics[name]
            assert same or (math.isnan(value) and math.isnan(reference.metrics[name]))
        assert [e["type"] for e in state_a[REWARD_ERRORS]] == [
            "ValueError",
            "TypeError",
            "KeyError",
        ]
        assert state_a[REWARD_ERRORS] == state_b[REWARD_ERRORS]


def test_sync_scoring_follows_the_functions_and_weights_as_they_change() -> None:
    """The sync path keeps how it calls the functions between rollouts; a function
    added or a weight changed since must still count."""

    def one(state):
        return 1.0

    def two(completion):
        return 2.0

    rubric = Rubric([one])
    assert rubric.score_values_sync(PROMPT, COMPLETION, "4", {}) == (
        1.0,
        {"one": 1.0, REWARD_ERRORS: 0.0},
    )
    rubric.add_reward_func(two, 3.0)
    assert rubric.score_values_sync(PROMPT, COMPLETION, "4", {})[0] == 7.0
    rubric.get_reward_weights()[0] = 0.5
    reward, metrics = rubric.score_values_sync(PROMPT, COMPLETION, "4", {})
    assert (reward, metrics) == (6.5, {"one": 1.0, "two": 2.0, REWARD_ERRORS: 0.0})


async def test_sync_and_async_functions_both_score() -> None:
    def sync_fn(completion):
        return 1.0

    async def async_fn(completion):
        await asyncio.sleep(0)
        return 2.0

    class AsyncCallable:
        async def __call__(self, answer):
            return 3.0

    result = await score(Rubric([sync_fn, async_fn, AsyncCallable()]))
    assert result.metrics["sync_fn"] == 1.0
    assert result.metrics["async_fn"] == 2.0
    assert result.metrics["AsyncCallable"] == 3.0
    assert result.reward == 6.0


async def test_a_sleeping_sync_function_does_not_stall_the_event_loop() -> None:
    def slow(completion):
        time.sleep(0.2)
        return 1.0

    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start_ticks = ticks
    try:
        result = await score(Rubric([slow]))
    finally:
        stop.set()
        await task
    assert result.reward == 1.0
    assert ticks - start_ticks >= 5


@pytest.mark.parametrize("parallel", [True, False])
async def test_all_sync_functions_of_a_rollout_share_one_thread_hop(parallel: bool) -> None:
    threads: list[int] = []

    def make(name: str):
        def func(completion):
            threads.append(threading.get_ident())
            return 1.0

        func.__name__ = name
        return func

    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    funcs = [make("a"), make("b"), make("c")]
    strict = Rubric(funcs, parallelize_scoring=parallel, offload_sync="always")
    for _ in range(3):
        await score(strict)
    assert executor.submits == 3  # one hop per rollout, not one per function
    assert threading.get_ident() not in threads


@pytest.mark.parametrize("parallel", [True, False])
async def test_quick_sync_functions_move_inline_after_one_timed_hop(parallel: bool) -> None:
    threads: list[int] = []

    def make(name: str):
        def func(completion):
            threads.append(threading.get_ident())
            return 1.0

        func.__name__ = name
        return func

    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    rubric = Rubric([make("a"), make("b"), make("c")], parallelize_scoring=parallel)
    for _ in range(3):
        await score(rubric)
    assert executor.submits == 1  # the first rollout's group, timed in the thread
    loop_thread = threading.get_ident()
    assert threads[:3] != [loop_thread] * 3 and threads[3:] == [loop_thread] * 6


async def test_adding_an_async_function_ends_sync_scoring() -> None:
    rubric = Rubric(funcs=[lambda completion: 1.0])
    assert rubric.score_rollout_sync(PROMPT, COMPLETION, "4", {}).reward == 1.0

    async def judged(completion) -> float:
        return 0.5

    rubric.add_reward_func(judged)
    assert not rubric.can_score_sync()
    with pytest.raises(TypeError, match="judged"):
        rubric.score_rollout_sync(PROMPT, COMPLETION, "4", {})
    assert (await rubric.score_rollout(PROMPT, COMPLETION, "4", {})).reward == 1.5


def test_score_state_sync_gives_a_plain_dict_of_metrics_as_score_rollout_does() -> None:
    rubric = FrozenMetricsRubric([said_hi])
    state = {
        "prompt": SAY_HI,
        "completion": [{"role": "assistant", "content": "hi"}],
        "answer": "",
    }
    reward, metrics = rubric.score_state_sync(state)
    assert type(metrics) is dict
    assert reward == 1.0 and metrics == {"said_hi": 1.0, "reward_errors": 0.0}
    assert type(rubric.score_rollout_sync(*rollout_args(state)).metrics) is dict


@pytest.mark.parametrize("offload_sync", ["auto", "always", "never"])
async def test_an_unhashable_callable_object_scores_on_the_event_loop(offload_sync: str) -> None:
    rubric = Rubric(funcs=[Contains("4")], offload_sync=offload_sync)
    state: State = {}
    score = await rubric.score_rollout("p", "4", "4", state)
    assert score.reward == 1.0 and score.metrics == {"Contains": 1.0, REWARD_ERRORS: 0.0}
    assert await rubric.call_reward_func(rubric.reward_funcs[0], "p", "5", "4", {}) == 0.0
    scores = await rubric.score_rollouts(**batch([{}, {}]))
    assert scores.reward == [1.0, 1.0]


async def test_an_unhashable_callable_object_scores_beside_an_async_function() -> None:
    async def length(completion: Any) -> float:
        return float(len(completion))

    for parallel in (True, False):
        rubric = Rubric(funcs=[Contains("4"), length], parallelize_scoring=parallel)
        score = await rubric.score_rollout("p", "44", "4", {})
        assert score.metrics == {"Contains": 1.0, "length": 2.0, REWARD_ERRORS: 0.0}
