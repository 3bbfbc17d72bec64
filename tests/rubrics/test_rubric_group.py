"""RubricGroup: summed rewards and merged metrics, errored rollouts, its members'
`score_group` hooks (in an EnvGroup too), settings of its own it refuses, its members'
own parsers, and Gym episodes scored as on the event loop."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from vfgym.envs import EnvGroup, SingleTurnEnv
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.parsers import XMLParser
from vfgym.rubrics import (
    REWARD_ERRORS,
    Rubric,
    RubricGroup,
)
from vfgym.rubrics.rubric import rollout_args
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


def matches_answer(completion: Any, answer: Any) -> float:
    return 1.0 if str(completion) == str(answer) else 0.0


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


PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


async def score(rubric: Rubric, state: dict | None = None, **kwargs: Any) -> Any:
    state = {} if state is None else state
    return await rubric.score_rollout(
        PROMPT, COMPLETION, "4", state, task="math", info={"level": 1}, example_id=7, **kwargs
    )


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


def completion_seen(completion: Any) -> float:
    return 1.0


def answer_seen(answer: Any) -> float:
    return 2.0


async def test_a_group_given_its_own_functions_adds_them_to_the_first_member() -> None:
    group = RubricGroup([Rubric([completion_seen])], funcs=[answer_seen], weights=[0.5])
    assert group.get_reward_func_names() == ["completion_seen", "answer_seen"]
    assert group.get_reward_weights() == [1.0, 0.5]
    result = await group.score_rollout(PROMPT, COMPLETION, "4", {})
    assert result.reward == 2.0


async def test_a_group_scores_a_batch_with_a_missing_state_like_a_single_rubric() -> None:
    states: list[Any] = [None, {}]
    args = ([PROMPT] * 2, [COMPLETION] * 2, ["4"] * 2, states, ["t"] * 2, [{}] * 2)
    alone = await Rubric([completion_seen]).score_rollouts(*args)
    grouped = await RubricGroup([Rubric([completion_seen])]).score_rollouts(*args)
    assert grouped.reward == alone.reward == [1.0, 1.0]
    assert grouped.metrics == alone.metrics


def parsed_answer_is_right(parser: Any, completion: Any, answer: Any) -> float:
    return 1.0 if parser.parse_answer(completion) == answer else 0.0


class SayDone(MultiTurnEnv):
    """One turn: the episode ends whatever the model says."""

    def is_completed(self, messages: Any, state: Any, **kwargs: Any) -> bool:
        return state["turn"] >= 1

    def env_response(self, messages: Any, state: Any, **kwargs: Any) -> tuple[Any, Any]:
        return [{"role": "user", "content": "ok"}], state


def said_done(completion: Any) -> float:
    return 1.0 if "done" in completion[-1]["content"] else 0.0


def fails(state: Any) -> float:
    raise ValueError("no score for this rollout")


def not_finite(state: Any) -> float:
    return math.nan


def said_done_too(completion: Any) -> float:
    return 0.5


said_done_too.__name__ = "said_done"  # the same metric name in another member


async def also_done(completion: Any) -> float:
    return 1.0


def group_of_every_kind() -> RubricGroup:
    return RubricGroup(
        [
            Rubric(funcs=[said_done, fails], weights=[1.0, 3.0]),
            Rubric(funcs=[said_done_too, not_finite, also_done], weights=[2.0, 1.0, 0.25]),
        ]
    )


def without_timing(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "timing"}


@pytest.mark.parametrize(
    "settings", [{"parser": XMLParser(["answer"])}, {"class_objects": {"unit": "cm"}}]
)
def test_a_groups_functions_with_settings_of_its_own_are_refused(
    settings: dict[str, Any],
) -> None:
    """The group's functions join its first member and would be scored with that
    member's parser (a plain Parser: the whole text as the answer, a silent 0)."""
    with pytest.raises(TypeError, match=r"Rubric\(funcs=") as caught:
        RubricGroup([Rubric()], funcs=[parsed_answer_is_right], **settings)
    assert next(iter(settings)) in str(caught.value)
    group = RubricGroup([Rubric()], **settings)  # a group's settings alone stay allowed
    with pytest.raises(TypeError, match="first member"):
        group.add_reward_func(parsed_answer_is_right)


async def test_the_advised_member_scores_with_its_parser() -> None:
    parser = XMLParser(["answer"])
    group = RubricGroup([Rubric(), Rubric(funcs=[parsed_answer_is_right], parser=parser)])
    score = await group.score_rollout(PROMPT, COMPLETION, "4", {})
    assert score.metrics["parsed_answer_is_right"] == 1.0


async def test_a_group_scores_a_gym_episode_as_it_scores_on_the_event_loop() -> None:
    """Same reward, metrics (summed same-named ones, NaN for the failed) and error
    records, whether the episode's end scores it or `score_rollout(s)` does."""
    from vfgym.gym import GymEnv

    env = SayDone(dataset=[{"question": "Say done.", "answer": ""}], rubric=group_of_every_kind())
    gym_env = GymEnv(env)
    try:
        await asyncio.to_thread(gym_env.reset, options={"index": 0})
        *_, terminated, _, info = await asyncio.to_thread(gym_env.step, "done")
        state = gym_env.state
    finally:
        gym_env.close()
    assert terminated
    expected_metrics = {
        "said_done": 1.5,
        "fails": math.nan,
        "not_finite": math.nan,
        "also_done": 1.0,
        REWARD_ERRORS: 2.0,
    }
    assert info["episode_reward"] == 1.0 + 2 * 0.5 + 0.25
    assert list(info["metrics"]) == list(expected_metrics)
    for key, value in expected_metrics.items():
        assert info["metrics"][key] == pytest.approx(value, nan_ok=True)
    assert [e["func"] for e in state[REWARD_ERRORS]] == ["fails", "not_finite"]

    again = {k: v for k, v in state.items() if k != REWARD_ERRORS}
    score = await env.rubric.score_rollout(*rollout_args(again))
    assert score.reward == info["episode_reward"]
    assert without_timing(again) == without_timing(state)
    columns = await env.rubric.score_rollouts(
        [state["prompt"]], [state["completion"]], [""], [{}], ["default"], [{}]
    )
    assert columns.reward == [info["episode_reward"]]
    for key, value in expected_metrics.items():
        assert score.metrics[key] == pytest.approx(value, nan_ok=True)
        assert columns.metrics[key] == [pytest.approx(value, nan_ok=True)]


@pytest.mark.parametrize("setting", [{"offload_sync": "always"}, {"parallelize_scoring": False}])
def test_a_setting_only_members_use_is_refused_by_the_group(setting) -> None:
    """Accepted, it was silently ignored: each member scores with its own."""
    with pytest.raises(TypeError, match="set it on the member rubrics"):
        RubricGroup([Rubric(funcs=[lambda completion: 1.0])], **setting)
