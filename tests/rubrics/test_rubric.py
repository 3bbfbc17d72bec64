"""Rubric: the arguments each reward function receives, sync and async scoring, errors
recorded never as a silent zero, batches of rollouts, and functions that cannot be
scored (generators, unhashable callables, a single function for a list)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
from typing import Any

import numpy as np
import pytest

from vfgym.rubrics import (
    REWARD_ERRORS,
    Rubric,
)

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


def raises() -> float:
    raise ValueError("cannot score")


async def test_call_reward_func_without_a_state_gives_nan_like_score_rollout() -> None:
    rubric = Rubric([raises])
    value = await rubric.call_reward_func(raises, PROMPT, COMPLETION, "4", None)  # type: ignore[arg-type]
    assert value != value  # NaN, not an AttributeError about None


def yields_a_reward(completion: Any) -> Any:
    yield 1.0


async def yields_a_reward_async(completion: Any) -> Any:
    yield 1.0


class YieldingScorer:
    async def __call__(self, completion: Any) -> Any:
        yield 1.0


def matches_answer(completion: Any, answer: Any) -> float:
    return 1.0 if str(completion) == str(answer) else 0.0


@pytest.mark.parametrize("func", [yields_a_reward, yields_a_reward_async, YieldingScorer()])
def test_a_generator_function_is_refused_when_added(func: Any) -> None:
    with pytest.raises(TypeError, match=r"yield.*return"):
        Rubric(funcs=[func])


def test_a_single_function_instead_of_a_list_is_explained() -> None:
    with pytest.raises(TypeError, match=r"funcs must be a list.*funcs=\[matches_answer\]"):
        Rubric(funcs=matches_answer)  # type: ignore[arg-type]
