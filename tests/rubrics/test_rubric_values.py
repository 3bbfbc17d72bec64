"""What reward functions return and how they are weighed: non-finite, complex and
unconvertible values, fractions and numpy numbers, weights of every kind and when they
are checked, partials' bound keywords, classes given as reward functions, and scoring a
State alone."""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from vfgym.parsers import Parser, XMLParser
from vfgym.rubrics import (
    REWARD_ERRORS,
    RewardSpec,
    Rubric,
)
from vfgym.types import State

PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


def correct(completion: Any) -> float:
    return 1.0


def nan_value(completion: Any) -> float:
    return math.nan


def inf_value(completion: Any) -> float:
    return math.inf


def numpy_nan(completion: Any) -> Any:
    return np.float32("nan")


@pytest.mark.parametrize("bad", [nan_value, inf_value, numpy_nan])
async def test_a_non_finite_value_is_a_recorded_error_not_a_nan_reward(bad: Any) -> None:
    # A weight of 0 is the usual "metric only" function: even it must not poison the
    # reward, and the failure must be listed like any other.
    rubric = Rubric([correct, bad], weights=[1.0, 0.0])
    state: dict = {}
    result = await rubric.score_rollout(PROMPT, COMPLETION, "4", state)
    assert result.reward == 1.0
    assert math.isnan(result.metrics[bad.__name__])
    assert result.metrics[REWARD_ERRORS] == 1.0
    [error] = state[REWARD_ERRORS]
    assert error["func"] == bad.__name__ and "finite" in error["message"]


@pytest.mark.parametrize("bad", [nan_value, inf_value])
def test_a_non_finite_value_is_an_error_in_sync_scoring_too(bad: Any) -> None:
    rubric = Rubric([correct, bad], weights=[1.0, 0.0])
    state: dict = {}
    reward, metrics = rubric.score_values_sync(PROMPT, COMPLETION, "4", state)
    assert reward == 1.0
    assert metrics[REWARD_ERRORS] == 1.0
    assert state[REWARD_ERRORS][0]["func"] == bad.__name__


async def test_score_rollouts_keeps_a_finite_reward_when_one_function_returns_nan() -> None:
    def sometimes_nan(example_id: int) -> float:
        return math.nan if example_id == 1 else 0.5

    rubric = Rubric([correct, sometimes_nan], weights=[1.0, 2.0])
    states: list[dict] = [{}, {}, {}]
    out = await rubric.score_rollouts(
        [PROMPT] * 3, [COMPLETION] * 3, ["4"] * 3, states, ["t"] * 3, [{}] * 3
    )
    assert out.reward == [2.0, 1.0, 2.0]
    assert out.metrics[REWARD_ERRORS] == [0.0, 1.0, 0.0]
    assert math.isnan(out.metrics["sometimes_nan"][1])


async def test_call_reward_func_refuses_a_non_finite_value() -> None:
    rubric = Rubric()
    state: dict = {}
    value = await rubric.call_reward_func(nan_value, PROMPT, COMPLETION, "4", state)
    assert math.isnan(value)
    assert state[REWARD_ERRORS][0]["func"] == "nan_value"


async def test_fractions_and_numpy_integers_are_rewards() -> None:
    def third(completion: Any) -> Fraction:
        return Fraction(1, 3)

    def count(completion: Any) -> Any:
        return np.int64(2)

    result = await Rubric([third, count]).score_rollout(PROMPT, COMPLETION, "4", {})
    assert result.metrics == {"third": 1 / 3, "count": 2.0, REWARD_ERRORS: 0.0}


@pytest.mark.parametrize("weight", [np.float32(0.5), np.int64(2), Fraction(1, 2), 0, -1.5])
async def test_any_real_number_is_a_weight(weight: Any) -> None:
    rubric = Rubric([correct], weights=[weight])
    assert rubric.get_reward_weights() == [float(weight)]
    assert type(rubric.get_reward_weights()[0]) is float
    result = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
    assert result.reward == float(weight)


@pytest.mark.parametrize("weight", [math.nan, math.inf, -math.inf, True, np.bool_(True), "1"])
def test_weights_that_are_not_finite_numbers_are_refused(weight: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="weight of 'correct'"):
        Rubric([correct], weights=[weight])
    with pytest.raises((TypeError, ValueError), match="weight of 'correct'"):
        Rubric().add_reward_func(correct, weight)


def matches(completion: Any, answer: Any, parser: Any) -> float:
    return 1.0 if parser.parse_answer(completion) == answer else 0.0


async def test_a_partials_bound_keywords_are_not_replaced_by_the_rubric() -> None:
    # The classic use: bind a parser of its own to a shared reward function. The
    # rubric's default Parser must not replace it.
    bound = functools.partial(matches, parser=XMLParser(["answer"]))
    rubric = Rubric([bound])
    assert isinstance(rubric.parser, Parser) and not isinstance(rubric.parser, XMLParser)
    result = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
    assert result.metrics["matches"] == 1.0
    assert rubric.score_values_sync(PROMPT, COMPLETION, "4", {})[1]["matches"] == 1.0


async def test_a_partials_bound_keywords_survive_var_kwargs_and_nesting() -> None:
    def graded(answer: Any, **kwargs: Any) -> float:
        assert "state" in kwargs  # the rest is still offered
        return 1.0 if answer == "bound" else 0.0

    inner = functools.partial(graded, answer="bound")
    outer = functools.partial(inner, extra=1)
    for func in (inner, outer):
        result = await Rubric([func]).score_rollout(PROMPT, COMPLETION, "real", {})
        assert result.metrics == {"graded": 1.0, REWARD_ERRORS: 0.0}


async def test_an_async_partial_keeps_its_bound_keywords() -> None:
    async def scaled(completion: Any, answer: Any) -> float:
        return 1.0 if answer == "fixed" else 0.0

    rubric = Rubric([functools.partial(scaled, answer="fixed")])
    result = await rubric.score_rollout(PROMPT, COMPLETION, "other", {})
    assert result.metrics["scaled"] == 1.0


def _finished_state(**extra: Any) -> dict[str, Any]:
    return {
        "prompt": PROMPT,
        "completion": COMPLETION,
        "answer": "4",
        "task": "arithmetic",
        "info": {"level": 2},
        "example_id": 7,
        "timing": {"total_ms": 1.0},
        **extra,
    }


def test_scoring_a_state_alone_reads_every_argument_a_function_asks_for_from_it() -> None:
    seen: dict[str, Any] = {}

    def everything(prompt, completion, answer, state, task, info, example_id, parser) -> float:
        seen.update(prompt=prompt, answer=answer, task=task, info=info, example_id=example_id)
        return 1.0 if parser.parse_answer(completion) == answer else 0.0

    def turns(state) -> float:
        return float(len(state["completion"]))

    rubric = Rubric([everything, turns], weights=[1.0, 0.5], parser=XMLParser(["answer"]))
    alone = rubric.score_state_sync(_finished_state())
    spelled = rubric.score_values_sync(
        PROMPT, COMPLETION, "4", _finished_state(), "arithmetic", {"level": 2}, 7
    )
    assert alone == spelled == (1.5, {"everything": 1.0, "turns": 1.0, REWARD_ERRORS: 0.0})
    assert seen == {
        "prompt": PROMPT,
        "answer": "4",
        "task": "arithmetic",
        "info": {"level": 2},
        "example_id": 7,
    }


def test_scoring_a_state_alone_records_the_time_and_the_errors_in_it() -> None:
    def broken(state) -> float:
        raise RuntimeError("no")

    state = _finished_state()
    reward, metrics = Rubric([correct, broken]).score_state_sync(state)
    assert (reward, metrics[REWARD_ERRORS]) == (1.0, 1.0) and math.isnan(metrics["broken"])
    assert [e["func"] for e in state[REWARD_ERRORS]] == ["broken"]
    timing = state["timing"]
    assert timing["scoring_ms"] >= 0.0 and timing["total_ms"] == 1.0 + timing["scoring_ms"]


def test_scoring_a_state_alone_goes_through_a_subclass_own_score_values_sync() -> None:
    class Doubled(Rubric):
        def score_values_sync(self, *args: Any, **kwargs: Any) -> tuple[float, dict]:
            reward, metrics = super().score_values_sync(*args, **kwargs)
            return reward * 2, metrics

    assert Doubled([correct]).score_state_sync(_finished_state())[0] == 2.0


def test_sync_scoring_follows_a_subclass_that_says_what_its_functions_are() -> None:
    class Fixed(Rubric):
        def get_reward_funcs(self) -> list:
            return [correct]

        def get_reward_weights(self) -> list[float]:
            return [3.0]

    assert Fixed().score_state_sync(_finished_state()) == (
        3.0,
        {"correct": 1.0, REWARD_ERRORS: 0.0},
    )


def matches_answer(completion: Any, answer: Any) -> float:
    return 1.0 if str(completion) == str(answer) else 0.0


def returns(value: Any) -> Any:
    def reward(completion: Any) -> Any:
        return value

    return reward


async def score(rubric: Rubric, state: dict | None = None, **kwargs: Any) -> Any:
    state = {} if state is None else state
    return await rubric.score_rollout(
        PROMPT, COMPLETION, "4", state, task="math", info={"level": 1}, example_id=7, **kwargs
    )


@pytest.mark.parametrize("weights", [1.0, 2, (w for w in [1.0])])
def test_weights_that_are_not_a_list_are_explained(weights: Any) -> None:
    with pytest.raises(TypeError, match=r"weights must be a list.*one per reward function"):
        Rubric(funcs=[matches_answer], weights=weights)


def test_weights_may_be_a_tuple_or_an_array() -> None:
    assert Rubric(funcs=[matches_answer], weights=(0.5,)).reward_weights == [0.5]
    assert Rubric(funcs=[matches_answer], weights=np.array([2.0])).reward_weights == [2.0]


@pytest.mark.parametrize("bad", ["1", None, math.nan, math.inf])
async def test_a_weight_set_after_construction_is_checked_when_scoring(bad: Any) -> None:
    rubric = Rubric(funcs=[matches_answer])
    rubric.reward_weights[0] = bad
    kind = TypeError if not isinstance(bad, float) else ValueError
    with pytest.raises(kind, match=r"weight of 'matches_answer' must be a"):
        await rubric.score_rollout("p", "4", "4", {})
    with pytest.raises(kind, match=r"weight of 'matches_answer' must be a"):
        rubric.score_rollout_sync("p", "4", "4", {})


async def test_a_valid_weight_set_after_construction_is_used() -> None:
    rubric = Rubric(funcs=[matches_answer])
    assert rubric.score_rollout_sync("p", "4", "4", {}).reward == 1.0
    rubric.reward_weights = [np.float32(0.5)]
    assert (await rubric.score_rollout("p", "4", "4", {})).reward == 0.5
    assert rubric.score_rollout_sync("p", "4", "4", {}).reward == 0.5


async def test_a_complex_numpy_number_is_refused_not_cut_to_its_real_part() -> None:
    rubric = Rubric(funcs=[returns(np.complex64(1 + 1j))])
    state: State = {}
    score = await rubric.score_rollout("p", "4", "4", state)
    assert math.isnan(score.metrics["reward"]) and score.reward == 0.0
    assert "must return a number" in state[REWARD_ERRORS][0]["message"]


@pytest.mark.parametrize(
    "value", [np.array([0.5]), np.array([0.5, 1.0]), 10**400], ids=["array1", "array2", "bigint"]
)
def test_a_value_that_does_not_convert_says_which_function_and_what_to_return(value: Any) -> None:
    rubric = Rubric(funcs=[returns(value)])
    state: State = {}
    score = rubric.score_rollout_sync("p", "4", "4", state)
    assert math.isnan(score.metrics["reward"])
    message = state[REWARD_ERRORS][0]["message"]
    assert "reward function 'reward' returned" in message and "one number" in message


class AsyncJudgeLike:
    async def __call__(self, answer: Any) -> float:
        return 1.0


class SyncCallable:
    def __call__(self, answer: Any) -> float:
        return 1.0


class Score:
    """A class used as a function: its instances are numbers."""

    def __init__(self, answer: Any) -> None:
        self.value = 1.0 if answer == "4" else 0.0

    def __float__(self) -> float:
        return self.value


@pytest.mark.parametrize("cls", [AsyncJudgeLike, SyncCallable])
def test_a_class_whose_instances_are_the_reward_function_is_refused(cls: type) -> None:
    """Calling the class makes an instance, never a number: an async `__call__` made
    it look async too (an "can't be used in 'await' expression" error per rollout)."""
    with pytest.raises(TypeError, match=rf"{cls.__name__}\(\)"):
        Rubric(funcs=[cls])
    assert Rubric(funcs=[cls()]).get_reward_func_names() == [cls.__name__]


async def test_a_class_whose_instances_are_numbers_scores_both_ways() -> None:
    assert RewardSpec.of(Score).is_async is False
    rubric = Rubric(funcs=[Score])
    state = {"prompt": PROMPT, "completion": COMPLETION, "answer": "4"}
    score = await rubric.score_rollout(PROMPT, COMPLETION, "4", {})
    assert rubric.score_state_sync(state) == (score.reward, score.metrics) == (1.0, score.metrics)
