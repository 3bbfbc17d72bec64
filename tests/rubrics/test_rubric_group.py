"""Rubric defects met with unusual reward functions, weights and group hooks, each pinned."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from vfgym.envs import EnvGroup, SingleTurnEnv
from vfgym.rubrics import REWARD_ERRORS, Rubric, RubricGroup
from vfgym.types import State

ROWS = [{"question": "What is 2 + 2?", "answer": "4"}]


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


# -- callable objects that cannot be hashed --------------------------------------------------


@dataclass
class Contains:
    """A reward function as a dataclass (eq=True makes its instances unhashable)."""

    needle: str

    def __call__(self, completion: Any) -> float:
        return 1.0 if self.needle in str(completion) else 0.0


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


# -- generator functions ---------------------------------------------------------------------


def yields_a_reward(completion: Any) -> Any:
    yield 1.0


async def yields_a_reward_async(completion: Any) -> Any:
    yield 1.0


class YieldingScorer:
    async def __call__(self, completion: Any) -> Any:
        yield 1.0


@pytest.mark.parametrize("func", [yields_a_reward, yields_a_reward_async, YieldingScorer()])
def test_a_generator_function_is_refused_when_added(func: Any) -> None:
    with pytest.raises(TypeError, match=r"yield.*return"):
        Rubric(funcs=[func])


# -- the shape of funcs and weights ----------------------------------------------------------


def matches_answer(completion: Any, answer: Any) -> float:
    return 1.0 if str(completion) == str(answer) else 0.0


def test_a_single_function_instead_of_a_list_is_explained() -> None:
    with pytest.raises(TypeError, match=r"funcs must be a list.*funcs=\[matches_answer\]"):
        Rubric(funcs=matches_answer)  # type: ignore[arg-type]


@pytest.mark.parametrize("weights", [1.0, 2, (w for w in [1.0])])
def test_weights_that_are_not_a_list_are_explained(weights: Any) -> None:
    with pytest.raises(TypeError, match=r"weights must be a list.*one per reward function"):
        Rubric(funcs=[matches_answer], weights=weights)


def test_weights_may_be_a_tuple_or_an_array() -> None:
    assert Rubric(funcs=[matches_answer], weights=(0.5,)).reward_weights == [0.5]
    assert Rubric(funcs=[matches_answer], weights=np.array([2.0])).reward_weights == [2.0]


# -- weights changed after construction ------------------------------------------------------


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


# -- odd return values -----------------------------------------------------------------------


def returns(value: Any) -> Any:
    def reward(completion: Any) -> Any:
        return value

    return reward


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


# -- score_group ---------------------------------------------------------------------------


class SyncRanker(Rubric):
    """A group hook written as a plain method."""

    def score_group(self, states: list[State], **kwargs: Any) -> None:  # type: ignore[override]
        for rank, state in enumerate(states):
            state["rank"] = float(rank)


class AsyncRanker(Rubric):
    async def score_group(self, states: list[State], **kwargs: Any) -> None:
        for rank, state in enumerate(states):
            state["rank"] = float(rank)


def rank(state: State) -> float:
    return state.get("rank", -1.0)


async def test_a_sync_score_group_hook_runs() -> None:
    scores = await SyncRanker(funcs=[rank]).score_rollouts(**batch([{}, {}]))
    assert scores.metrics["rank"] == [0.0, 1.0]


async def test_a_group_runs_its_members_hooks_when_asked_for_its_own() -> None:
    group = RubricGroup([AsyncRanker(funcs=[rank]), SyncRanker(funcs=[matches_answer])])
    states: list[State] = [{}, {}]
    await group.score_group(states)
    assert [s["rank"] for s in states] == [0.0, 1.0]


async def test_a_rubric_group_in_an_env_group_runs_its_members_hooks() -> None:
    env = SingleTurnEnv(dataset=ROWS, rubric=RubricGroup([AsyncRanker(funcs=[rank])]))
    group = EnvGroup([env], env_names=["math"])
    columns = batch([{"task": "math"}, {"task": "math"}])
    columns["tasks"] = ["math", "math"]
    scores = await group.rubric.score_rollouts(**columns)
    assert scores.metrics["rank"] == [0.0, 1.0]


async def test_a_group_subclass_own_hook_runs_once_and_members_hooks_too() -> None:
    calls: list[str] = []

    class Counted(AsyncRanker):
        async def score_group(self, states: list[State], **kwargs: Any) -> None:
            calls.append("member")
            await super().score_group(states, **kwargs)

    class Voting(RubricGroup):
        async def score_group(self, states: list[State], **kwargs: Any) -> None:
            calls.append("group")
            for state in states:
                state["vote"] = 1.0
            await super().score_group(states, **kwargs)

    def vote(state: State) -> float:
        return state.get("vote", 0.0)

    group = Voting([Counted(funcs=[rank]), Rubric(funcs=[vote])])
    scores = await group.score_rollouts(**batch([{}, {}]))
    assert scores.metrics["vote"] == [1.0, 1.0] and scores.metrics["rank"] == [0.0, 1.0]
    assert calls == ["group", "member"]


async def test_a_plain_group_runs_each_members_hook_once() -> None:
    calls: list[int] = []

    class Counted(AsyncRanker):
        async def score_group(self, states: list[State], **kwargs: Any) -> None:
            calls.append(len(states))
            await super().score_group(states, **kwargs)

    group = RubricGroup([Counted(funcs=[rank]), Rubric(funcs=[matches_answer])])
    scores = await group.score_rollouts(**batch([{}, {}, {}]))
    assert scores.metrics["rank"] == [0.0, 1.0, 2.0] and calls == [3]


async def test_a_groups_metrics_come_in_one_order_scored_one_by_one_or_as_a_batch() -> None:
    def first(completion: Any) -> float:
        return 1.0

    def second(completion: Any) -> float:
        return 2.0

    group = RubricGroup([Rubric(funcs=[first]), Rubric(funcs=[second])])
    one = await group.score_rollout("p", "4", "4", {})
    many = await group.score_rollouts(**batch([{}, {"error": "model server failed"}]))
    assert list(one.metrics) == list(many.metrics) == ["first", "second", REWARD_ERRORS]
    assert many.metrics["second"][0] == 2.0 and math.isnan(many.metrics["second"][1])


async def test_a_sync_score_group_hook_of_an_env_group_member_runs() -> None:
    """An EnvGroup hands each member's rubric its own task's rollouts: a member whose
    hook is a plain method crashed there ("NoneType can't be used in 'await'")."""
    env = SingleTurnEnv(dataset=ROWS, rubric=SyncRanker(funcs=[rank]))
    group = EnvGroup([env], env_names=["math"])
    columns = batch([{"task": "math"}, {"task": "math"}])
    columns["tasks"] = ["math", "math"]
    scores = await group.rubric.score_rollouts(**columns)
    assert scores.metrics["rank"] == [0.0, 1.0]
