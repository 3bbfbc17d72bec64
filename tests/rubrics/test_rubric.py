"""Rubric: the arguments each reward function receives, sync and async scoring, errors
recorded never as a silent zero, batches of rollouts, and functions that cannot be
scored (generators, unhashable callables, a single function for a list)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from vfgym.rubrics import (
    REWARD_ERRORS,
    Rubric,
)
from vfgym.rubrics.rubric import rollout_args
from vfgym.types import Messages, State

PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


STANDARD = {"prompt", "completion", "answer", "state", "task", "info", "example_id", "parser"}


async def score(rubric: Rubric, state: dict | None = None, **kwargs: Any) -> Any:
    state = {} if state is None else state
    return await rubric.score_rollout(
        PROMPT, COMPLETION, "4", state, task="math", info={"level": 1}, example_id=7, **kwargs
    )


async def test_functions_receive_only_the_arguments_they_declare() -> None:
    seen: dict[str, Any] = {}

    def wants_two(completion, answer):
        seen["two"] = (completion, answer)
        return 1.0

    def wants_meta(task, info, example_id, parser):
        seen["meta"] = (task, info, example_id, parser)
        return 1.0

    def wants_nothing():
        return 0.5

    rubric = Rubric([wants_two, wants_meta, wants_nothing])
    result = await score(rubric)
    assert seen["two"] == (COMPLETION, "4")
    assert seen["meta"] == ("math", {"level": 1}, 7, rubric.parser)
    assert result.reward == 2.5


async def test_a_function_with_var_kwargs_receives_everything() -> None:
    received: dict[str, Any] = {}

    def everything(completion, **kwargs):
        received.update(kwargs, completion=completion)
        return 1.0

    rubric = Rubric([everything], class_objects={"lookup": {"a": 1}})
    await score(rubric, extra_value=3)
    assert set(received) == STANDARD | {"lookup", "extra_value"}
    assert received["lookup"] == {"a": 1}
    assert received["extra_value"] == 3


async def test_class_objects_are_offered_by_name() -> None:
    def uses_table(completion, table):
        return table[completion[-1]["content"]]

    rubric = Rubric([uses_table], class_objects={"table": {"<answer>4</answer>": 0.25}})
    assert (await score(rubric)).reward == 0.25


def test_unknown_constructor_kwargs_are_an_error_not_an_attribute() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['judge_thing'\]"):
        Rubric(judge_thing=1)
    with pytest.raises(ValueError, match="may not replace the standard argument 'answer'"):
        Rubric(class_objects={"answer": 1})


async def test_a_missing_required_argument_is_a_recorded_error() -> None:
    def needs_secret(completion, secret):
        return 1.0

    state: dict = {}
    result = await score(Rubric([needs_secret]), state)
    assert math.isnan(result.metrics["needs_secret"])
    [error] = state["reward_errors"]
    assert error["type"] == "TypeError"
    assert "['secret']" in error["message"] and "class_objects" in error["message"]


def test_positional_only_parameters_are_refused_when_added() -> None:
    def positional(completion, /):
        return 1.0

    with pytest.raises(TypeError, match="positional-only"):
        Rubric([positional])


async def test_signatures_are_read_once_not_per_rollout() -> None:
    class Counted:
        reads = 0
        __name__ = "counted"

        @property
        def __signature__(self) -> inspect.Signature:
            Counted.reads += 1
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            return inspect.Signature([inspect.Parameter("completion", kind)])

        def __call__(self, completion):
            return 1.0

    rubric = Rubric([Counted()])
    reads_after_add = Counted.reads
    for _ in range(20):
        await score(rubric)
    assert Counted.reads == reads_after_add


async def test_every_calling_style_gets_the_same_arguments() -> None:
    """Plain functions are called by position (one itemgetter, no dict); everything
    else by name. Both must hand each function exactly what it declares."""
    seen: dict[str, Any] = {}

    def logged(func):
        @functools.wraps(func)  # reports func's signature, but takes keywords only
        def wrapper(**kwargs):
            seen[func.__name__] = kwargs
            return func(**kwargs)

        return wrapper

    @logged
    def wrapped(completion, answer):
        return 1.0

    def keyword_only(completion, *, answer):
        seen["keyword_only"] = answer
        return 2.0

    def with_default(answer, bonus=0.5):  # bonus is not on offer: its default counts
        return bonus

    def positional(state, task, info, example_id):
        seen["positional"] = (state, task, info, example_id)
        return 4.0

    class Scorer:
        def score(self, answer, parser):
            seen["method"] = (answer, parser)
            return 8.0

    rubric = Rubric([wrapped, keyword_only, with_default, positional, Scorer().score])
    state: dict = {}
    for sync in (False, True):
        if sync:
            args = (PROMPT, COMPLETION, "4", state, "math", {"level": 1}, 7)
            result = rubric.score_rollout_sync(*args)
        else:
            result = await score(rubric, state)
        assert result.metrics == {
            "wrapped": 1.0,
            "keyword_only": 2.0,
            "with_default": 0.5,
            "positional": 4.0,
            "score": 8.0,
            REWARD_ERRORS: 0.0,
        }
        assert seen == {
            "wrapped": {"completion": COMPLETION, "answer": "4"},
            "keyword_only": "4",
            "positional": (state, "math", {"level": 1}, 7),
            "method": ("4", rubric.parser),
        }
        seen.clear()
    assert "reward_errors" not in state


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


async def test_names_of_partials_and_callable_objects() -> None:
    def base(completion, scale):
        return scale

    class Scorer:
        def __call__(self, completion):
            return 1.0

    named = functools.partial(base, scale=3.0)
    renamed = functools.partial(base, scale=5.0)
    renamed.__name__ = "five"  # type: ignore[attr-defined]
    rubric = Rubric([named, renamed, Scorer()], weights=[1.0, 0.0, 2.0])
    assert rubric.get_reward_func_names() == ["base", "five", "Scorer"]
    result = await score(rubric)
    assert result.metrics == {"base": 3.0, "five": 5.0, "Scorer": 1.0, REWARD_ERRORS: 0.0}
    assert result.reward == 5.0


async def test_reward_is_the_weighted_sum() -> None:
    def one(completion):
        return 1.0

    def half(completion):
        return 0.5

    rubric = Rubric([one], weights=[2.0])
    rubric.add_reward_func(half, weight=-4.0)
    assert rubric.get_reward_weights() == [2.0, -4.0]
    assert rubric.get_reward_funcs() == [one, half]
    assert (await score(rubric)).reward == 0.0
    assert (await score(rubric, apply_weights=False)).reward == 1.5


def test_weight_and_name_mistakes_are_reported() -> None:
    def f(completion):
        return 1.0

    with pytest.raises(ValueError, match="1 reward function"):
        Rubric([f], weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="already in this rubric"):
        Rubric([f, f])
    with pytest.raises(TypeError, match="must be a number"):
        Rubric().add_reward_func(f, weight="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callable"):
        Rubric([42])  # type: ignore[list-item]


async def test_bools_and_numpy_numbers_count_as_rewards() -> None:
    def flag(completion):
        return True

    def numpy_value(completion):
        return np.float32(0.25)

    result = await score(Rubric([flag, numpy_value]))
    assert result.metrics["flag"] == 1.0
    assert result.metrics["numpy_value"] == 0.25
    assert result.reward == 1.25


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


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submits = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        self.submits += 1
        return super().submit(fn, *args, **kwargs)


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


async def test_sequential_scoring_keeps_the_declared_order() -> None:
    def first(state):
        state.setdefault("order", []).append("first")
        return 1.0

    async def second(state):
        state["order"].append("second")
        return 1.0

    def third(state):
        state["order"].append("third")
        return 1.0

    state: dict = {}
    await score(Rubric([first, second, third], parallelize_scoring=False), state)
    assert state["order"] == ["first", "second", "third"]


async def test_parallel_scoring_runs_async_functions_concurrently() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    async def a(completion):
        a_started.set()
        await b_started.wait()
        return 1.0

    async def b(completion):
        b_started.set()
        await a_started.wait()
        return 1.0

    # Each waits for the other: this only finishes if they run at the same time.
    result = await asyncio.wait_for(score(Rubric([a, b])), timeout=10)
    assert result.reward == 2.0


async def test_failures_are_recorded_never_a_silent_zero() -> None:
    def good(completion):
        return 1.0

    def raises(completion):
        raise ValueError("cannot parse the board")

    async def async_raises(completion):
        raise KeyError("missing")

    def returns_none(completion):
        return None

    def returns_text(completion):
        return "1.0"

    state: dict = {"reward_errors": [{"func": "earlier", "type": "X", "message": "kept"}]}
    rubric = Rubric(
        [good, raises, async_raises, returns_none, returns_text], weights=[2, 1, 1, 1, 1]
    )
    result = await score(rubric, state)
    assert result.reward == 2.0  # only the function that succeeded counts
    assert result.metrics["good"] == 1.0
    for name in ("raises", "async_raises", "returns_none", "returns_text"):
        assert math.isnan(result.metrics[name])
    assert result.metrics[REWARD_ERRORS] == 4.0
    errors = {e["func"]: e for e in state["reward_errors"]}
    assert errors["earlier"]["message"] == "kept"
    assert errors["raises"] == {
        "func": "raises",
        "type": "ValueError",
        "message": "cannot parse the board",
    }
    assert errors["async_raises"]["type"] == "KeyError"
    assert "returned None" in errors["returns_none"]["message"]
    assert "returned '1.0' (str)" in errors["returns_text"]["message"]


async def test_call_reward_func_returns_nan_and_records_on_failure() -> None:
    def broken(completion):
        raise RuntimeError("boom")

    rubric = Rubric()
    state: dict = {}
    value = await rubric.call_reward_func(broken, PROMPT, COMPLETION, "4", state)
    assert math.isnan(value)
    assert state["reward_errors"][0]["message"] == "boom"


async def test_a_rubric_without_functions_scores_zero_both_ways() -> None:
    rubric = Rubric()
    assert rubric.can_score_sync()
    for score in (
        rubric.score_rollout_sync(PROMPT, COMPLETION, "4", {}),
        await rubric.score_rollout(PROMPT, COMPLETION, "4", {}),
    ):
        assert score.reward == 0.0 and score.metrics == {"reward_errors": 0.0}


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


async def test_scoring_time_is_recorded_in_state() -> None:
    def f(completion):
        return 1.0

    fresh: dict = {}
    await score(Rubric([f]), fresh)
    assert fresh["timing"]["scoring_ms"] >= 0.0
    assert fresh["timing"]["total_ms"] == fresh["timing"]["scoring_ms"]

    existing = {"timing": {"generation_ms": 5.0, "total_ms": 5.0}}
    await score(Rubric([f]), existing)
    timing = existing["timing"]
    assert timing["total_ms"] == pytest.approx(5.0 + timing["scoring_ms"])
    assert timing["generation_ms"] == 5.0


async def test_score_rollouts_returns_columns_in_order() -> None:
    def correct(completion, answer):
        return float(completion[-1]["content"] == answer)

    async def ident(example_id):
        return float(example_id)

    rubric = Rubric([correct, ident])
    n = 4
    scores = await rubric.score_rollouts(
        prompts=[PROMPT] * n,
        completions=[[{"role": "assistant", "content": str(i)}] for i in range(n)],
        answers=["1", "1", "2", "3"],
        states=[{} for _ in range(n)],
        tasks=["default"] * n,
        infos=[{} for _ in range(n)],
    )
    assert scores.metrics["correct"] == [0.0, 1.0, 1.0, 1.0]
    assert scores.metrics["ident"] == [0.0, 1.0, 2.0, 3.0]
    assert scores.reward == [0.0, 2.0, 3.0, 4.0]
    assert scores.metrics[REWARD_ERRORS] == [0.0] * n


async def test_score_rollouts_respects_max_concurrent() -> None:
    active = peak = 0

    async def tracked(completion):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.005)
        active -= 1
        return 1.0

    n = 12
    scores = await Rubric([tracked]).score_rollouts(
        [PROMPT] * n,
        [COMPLETION] * n,
        ["4"] * n,
        [{} for _ in range(n)],
        ["default"] * n,
        [{} for _ in range(n)],
        max_concurrent=3,
    )
    assert scores.reward == [1.0] * n
    assert 1 <= peak <= 3


async def test_score_group_runs_before_each_rollout_is_scored() -> None:
    class Ranked(Rubric):
        async def score_group(self, states, **kwargs):
            lengths = [len(c[-1]["content"]) for c in kwargs["completions"]]
            for state, length in zip(states, lengths, strict=True):
                state["shortest"] = length == min(lengths)

    def shortest(state):
        return float(state["shortest"])

    completions = [[{"role": "assistant", "content": t}] for t in ("long answer", "ok", "medium")]
    scores = await Ranked([shortest]).score_rollouts(
        [PROMPT] * 3, completions, ["x"] * 3, [{}, {}, {}], ["t"] * 3, [{}, {}, {}]
    )
    assert scores.reward == [0.0, 1.0, 0.0]


async def test_score_rollouts_checks_lengths_and_handles_empty_batches() -> None:
    def f(completion):
        return 1.0

    rubric = Rubric([f])
    with pytest.raises(ValueError, match="2 prompts"):
        await rubric.score_rollouts(
            [PROMPT] * 2, [COMPLETION], ["4"] * 2, [{}, {}], ["t"] * 2, [{}, {}]
        )
    empty = await rubric.score_rollouts([], [], [], [], [], [])
    assert empty.reward == []
    assert empty.metrics == {"f": [], REWARD_ERRORS: []}


async def test_score_rollouts_gives_an_errored_rollout_nan_without_scoring_it() -> None:
    calls: list[int] = []

    def correct(completion, answer, example_id):
        calls.append(example_id)
        return float(completion[-1]["content"] == answer)

    async def length(completion, example_id):
        calls.append(example_id)
        return float(len(completion[-1]["content"]))

    seen: list[int] = []

    class Grouped(Rubric):
        async def score_group(self, states, **kwargs):
            seen.extend(kwargs["example_ids"])

        async def score_rollout(self, *args, **kwargs):
            score = await super().score_rollout(*args, **kwargs)
            score.metrics["extra"] = 5.0  # a metric only scored rollouts have
            return score

    errored = {"error": {"type": "APIError", "message": "server down"}}
    scores = await Grouped([correct, length], weights=[1.0, 0.5]).score_rollouts(
        [PROMPT] * 2,
        [[], [{"role": "assistant", "content": "4"}]],
        ["4", "4"],
        [errored, {}],
        ["t"] * 2,
        [{}, {}],
        example_ids=[10, 11],
    )
    assert sorted(calls) == [11, 11]  # nothing called for the errored rollout
    assert seen == [10, 11]  # the score_group hook still sees the whole batch
    assert set(scores.metrics) == {"correct", "length", "extra", REWARD_ERRORS}
    assert math.isnan(scores.reward[0])
    for name, column in scores.metrics.items():
        assert math.isnan(column[0]), name
    assert scores.reward[1] == 1.0 + 0.5
    assert scores.metrics["correct"][1] == 1.0
    assert scores.metrics["length"][1] == 1.0
    assert scores.metrics[REWARD_ERRORS][1] == 0.0
    assert scores.metrics["extra"][1] == 5.0
    assert REWARD_ERRORS not in errored and "timing" not in errored


SAY_HI = [{"role": "user", "content": "Say hi."}]


class FrozenMetricsRubric(Rubric):
    """A rubric whose own `score_values_sync` hands back a read-only view of its metrics."""

    def score_values_sync(self, *args: Any, **kwargs: Any) -> tuple[float, Mapping[str, float]]:
        reward, metrics = super().score_values_sync(*args, **kwargs)
        return reward, MappingProxyType(metrics)


def said_hi(completion: Messages) -> float:
    return 1.0 if "hi" in str(completion) else 0.0


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


def raises() -> float:
    raise ValueError("cannot score")


async def test_call_reward_func_without_a_state_gives_nan_like_score_rollout() -> None:
    rubric = Rubric([raises])
    value = await rubric.call_reward_func(raises, PROMPT, COMPLETION, "4", None)  # type: ignore[arg-type]
    assert value != value  # NaN, not an AttributeError about None


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


def yields_a_reward(completion: Any) -> Any:
    yield 1.0


async def yields_a_reward_async(completion: Any) -> Any:
    yield 1.0


class YieldingScorer:
    async def __call__(self, completion: Any) -> Any:
        yield 1.0


def matches_answer(completion: Any, answer: Any) -> float:
    return 1.0 if str(completion) == str(answer) else 0.0


class SyncRanker(Rubric):
    """A group hook written as a plain method."""

    def score_group(self, states: list[State], **kwargs: Any) -> None:  # type: ignore[override]
        for rank, state in enumerate(states):
            state["rank"] = float(rank)


def rank(state: State) -> float:
    return state.get("rank", -1.0)


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


@pytest.mark.parametrize("func", [yields_a_reward, yields_a_reward_async, YieldingScorer()])
def test_a_generator_function_is_refused_when_added(func: Any) -> None:
    with pytest.raises(TypeError, match=r"yield.*return"):
        Rubric(funcs=[func])


def test_a_single_function_instead_of_a_list_is_explained() -> None:
    with pytest.raises(TypeError, match=r"funcs must be a list.*funcs=\[matches_answer\]"):
        Rubric(funcs=matches_answer)  # type: ignore[arg-type]


async def test_a_sync_score_group_hook_runs() -> None:
    scores = await SyncRanker(funcs=[rank]).score_rollouts(**batch([{}, {}]))
    assert scores.metrics["rank"] == [0.0, 1.0]
