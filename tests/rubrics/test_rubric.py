"""Rubrics: argument injection, sync/async scoring, errors, groups, tool counts, the judge."""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from openai.types.chat import ChatCompletionMessageToolCall

from vfgym.inference.server import ModelServer
from vfgym.parsers import XMLParser
from vfgym.rubrics import (
    DEFAULT_JUDGE_PROMPT,
    REWARD_ERRORS,
    JudgeRubric,
    Rubric,
    RubricGroup,
    ToolRubric,
)

PROMPT = [{"role": "user", "content": "What is 2+2?"}]
COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]
STANDARD = {"prompt", "completion", "answer", "state", "task", "info", "example_id", "parser"}


async def score(rubric: Rubric, state: dict | None = None, **kwargs: Any) -> Any:
    state = {} if state is None else state
    return await rubric.score_rollout(
        PROMPT, COMPLETION, "4", state, task="math", info={"level": 1}, example_id=7, **kwargs
    )


# -- argument injection -----------------------------------------------------------


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


# -- names and weights ------------------------------------------------------------


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


# -- sync and async, off the event loop -------------------------------------------


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


# -- errors -----------------------------------------------------------------------


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


# -- timing and batches -----------------------------------------------------------


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


# -- RubricGroup ------------------------------------------------------------------


def shared(completion):
    return 1.0


async def test_rubric_group_sums_rewards_and_merges_metrics() -> None:
    def only_a(completion):
        return 2.0

    def only_b(completion):
        raise ValueError("b failed")

    a = Rubric([shared, only_a], weights=[1.0, 0.5])
    b = Rubric([shared, only_b], weights=[3.0, 1.0])
    group = RubricGroup([a, b])
    assert group.get_reward_func_names() == ["shared", "only_a", "shared", "only_b"]
    assert group.get_reward_weights() == [1.0, 0.5, 3.0, 1.0]
    assert group.get_reward_funcs() == [shared, only_a, shared, only_b]

    state: dict = {}
    result = await score(group, state)
    assert result.reward == 1.0 + 1.0 + 3.0
    assert result.metrics["shared"] == 2.0
    assert result.metrics["only_a"] == 2.0
    assert math.isnan(result.metrics["only_b"])
    assert result.metrics[REWARD_ERRORS] == 1.0
    assert state["timing"]["scoring_ms"] == pytest.approx(state["timing"]["total_ms"])

    scores = await group.score_rollouts(
        [PROMPT] * 2, [COMPLETION] * 2, ["4"] * 2, [{}, {}], ["t"] * 2, [{}, {}]
    )
    assert scores.reward == [5.0, 5.0]
    assert scores.metrics["shared"] == [2.0, 2.0]
    assert scores.metrics[REWARD_ERRORS] == [1.0, 1.0]


async def test_rubric_group_gives_an_errored_rollout_nan_in_every_column() -> None:
    calls: list[int] = []

    def in_a(example_id):
        calls.append(example_id)
        return 1.0

    def in_b(example_id):
        calls.append(example_id)
        return 2.0

    def also_in_b(example_id):
        calls.append(example_id)
        raise ValueError("b failed")

    group = RubricGroup([Rubric([in_a]), Rubric([in_b, also_in_b], weights=[3.0, 1.0])])
    errored = {"error": {"type": "HookError", "message": "setup_state failed"}}
    scores = await group.score_rollouts(
        [PROMPT] * 2,
        [[], COMPLETION],
        ["4"] * 2,
        [errored, {}],
        ["t"] * 2,
        [{}, {}],
        example_ids=[20, 21],
    )
    assert sorted(calls) == [21, 21, 21]  # no member called anything for the errored rollout
    assert set(scores.metrics) == {"in_a", "in_b", "also_in_b", REWARD_ERRORS}
    assert math.isnan(scores.reward[0])
    for name, column in scores.metrics.items():
        assert math.isnan(column[0]), name
    assert scores.reward[1] == 1.0 + 3.0 * 2.0
    assert scores.metrics["in_a"][1] == 1.0
    assert scores.metrics["in_b"][1] == 2.0
    assert math.isnan(scores.metrics["also_in_b"][1])
    assert scores.metrics[REWARD_ERRORS][1] == 1.0
    assert "timing" not in errored


def test_rubric_group_needs_rubrics_and_adds_to_the_first() -> None:
    with pytest.raises(ValueError, match="at least one rubric"):
        RubricGroup([])
    with pytest.raises(TypeError, match="Rubric instances"):
        RubricGroup([shared])  # type: ignore[list-item]
    first, second = Rubric(), Rubric()
    RubricGroup([first, second]).add_reward_func(shared, 2.0)
    assert first.get_reward_funcs() == [shared]
    assert second.get_reward_funcs() == []


# -- ToolRubric -------------------------------------------------------------------


def search(query: str) -> str:
    """Search."""
    return query


def calculator(expression: str) -> str:
    """Calculate."""
    return expression


def call(name: str) -> dict:
    return {"id": name, "type": "function", "function": {"name": name, "arguments": "{}"}}


async def test_tool_rubric_counts_calls_from_the_completion() -> None:
    rubric = ToolRubric(tools=[search, calculator])
    assert rubric.get_reward_func_names() == [
        "total_tool_calls",
        "search_calls",
        "calculator_calls",
    ]
    assert rubric.get_reward_weights() == [0.0, 0.0, 0.0]
    assert [t["function"]["name"] for t in rubric.oai_tools] == ["search", "calculator"]
    as_object = ChatCompletionMessageToolCall.model_validate(call("calculator"))
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [call("search"), call("search")]},
        {"role": "tool", "content": "r", "tool_call_id": "search"},
        {"role": "assistant", "content": None, "tool_calls": [as_object]},
        {"role": "assistant", "content": "done"},
    ]
    result = await rubric.score_rollout(PROMPT, completion, "", {})
    assert result.metrics == {
        "total_tool_calls": 3.0,
        "search_calls": 2.0,
        "calculator_calls": 1.0,
        REWARD_ERRORS: 0.0,
    }
    assert result.reward == 0.0


async def test_tool_rubric_prefers_the_environments_record() -> None:
    rubric = ToolRubric(tools=[search, {"type": "function", "function": {"name": "lookup"}}])
    state = {"tools_called": [{"name": "search"}, "lookup", {"name": "search", "args": {}}]}
    result = await rubric.score_rollout(PROMPT, COMPLETION, "", state)
    assert result.metrics["total_tool_calls"] == 3.0
    assert result.metrics["search_calls"] == 2.0
    assert result.metrics["lookup_calls"] == 1.0


# -- JudgeRubric ------------------------------------------------------------------


def grading_policy(messages: list[dict]) -> str:
    """A judge that says yes when the answer to grade block holds the reference answer."""
    text = messages[-1]["content"]
    reference = text.split("Reference answer:\n```\n")[1].split("\n```")[0]
    graded = text.split("Answer to grade:\n```\n")[1].split("\n```")[0]
    return "yes" if graded.strip() == reference.strip() else "no"


async def yes_reward(judge, prompt, completion, answer, state) -> float:
    verdict = await judge(prompt, completion, answer, state)
    return 1.0 if verdict.strip().lower().startswith("yes") else 0.0


async def verdict_length(judge, prompt, completion, answer, state) -> float:
    return float(len(await judge(prompt, completion, answer, state)))


@pytest.mark.parametrize("parallel", [False, True])
async def test_judge_asks_the_server_once_per_rollout(parallel: bool) -> None:
    async with ModelServer(grading_policy) as server:
        rubric = JudgeRubric(
            parser=XMLParser(["answer"]),
            parallelize_scoring=parallel,
            judge_client=server.client(),
            judge_model="judge-model",
            judge_sampling_args={"temperature": 0.0, "max_tokens": 8, "top_p": None},
            funcs=[yes_reward, verdict_length],
            weights=[1.0, 0.0],
        )
        state: dict = {}
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert result.metrics == {"yes_reward": 1.0, "verdict_length": 3.0, REWARD_ERRORS: 0.0}
        assert result.reward == 1.0

        [request] = server.requests
        assert request["model"] == "judge-model"
        assert request["temperature"] == 0.0
        assert request["max_tokens"] == 8
        assert "top_p" not in request
        [message] = request["messages"]
        assert message["role"] == "user"
        assert "What is 2+2?" in message["content"]
        assert "Reference answer:\n```\n4\n```" in message["content"]
        assert "Answer to grade:\n```\n4\n```" in message["content"]
        assert state["judge_response"] == {rubric.judge_key(): {message["content"]: "yes"}}

        wrong = [{"role": "assistant", "content": "<answer>5</answer>"}]
        result = await rubric.score_rollout(PROMPT, wrong, "4", {})
        assert result.metrics["yes_reward"] == 0.0
        assert len(server.requests) == 2


async def test_judge_works_with_a_sync_openai_client_without_blocking() -> None:
    async with ModelServer(grading_policy) as server:
        rubric = JudgeRubric(
            parser=XMLParser(["answer"]), judge_client=server.sync_client(), funcs=[yes_reward]
        )
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
        assert result.reward == 1.0
        assert len(server.requests) == 1


async def test_a_failing_judge_server_is_a_recorded_error() -> None:
    async with ModelServer(grading_policy) as server:
        server.inject_faults("500")
        rubric = JudgeRubric(judge_client=server.client(), funcs=[yes_reward])
        state: dict = {}
        result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
        assert math.isnan(result.metrics["yes_reward"])
        [error] = state["reward_errors"]
        assert error["type"] == "RuntimeError"
        assert "judge model 'gpt-4.1-nano' could not answer" in error["message"]
        assert state["judge_response"] == {}  # nothing cached from a failed call


async def test_judge_without_client_or_key_fails_on_use_not_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rubric = JudgeRubric(funcs=[yes_reward])  # no client is made here
    assert "judge_client" not in rubric.class_objects
    state: dict = {}
    result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
    assert math.isnan(result.metrics["yes_reward"])
    assert "OPENAI_API_KEY" in state["reward_errors"][0]["message"]


def test_judge_prompt_placeholders_are_checked() -> None:
    assert "{question}" in DEFAULT_JUDGE_PROMPT
    with pytest.raises(ValueError, match=r"unknown placeholder\(s\) \['reference'\]"):
        JudgeRubric(judge_prompt="Q: {question} R: {reference}")
    with pytest.raises(ValueError, match="not a valid format string"):
        JudgeRubric(judge_prompt="broken {question")
    JudgeRubric(judge_prompt='JSON like {{"ok": true}} for {response}')
