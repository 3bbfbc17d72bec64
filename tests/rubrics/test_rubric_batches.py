"""Scoring batches of rollouts: `score_rollouts` returns columns in order, keeps to
`max_concurrent`, checks lengths, gives errored rollouts NaN, and runs the `score_group`
hook first."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from vfgym.rubrics import (
    REWARD_ERRORS,
    Rubric,
)
from vfgym.types import State

PROMPT = [{"role": "user", "content": "What is 2+2?"}]


COMPLETION = [{"role": "assistant", "content": "<answer>4</answer>"}]


async def score(rubric: Rubric, state: dict | None = None, **kwargs: Any) -> Any:
    state = {} if state is None else state
    return await rubric.score_rollout(
        PROMPT, COMPLETION, "4", state, task="math", info={"level": 1}, example_id=7, **kwargs
    )


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


class SyncRanker(Rubric):
    """A group hook written as a plain method."""

    def score_group(self, states: list[State], **kwargs: Any) -> None:  # type: ignore[override]
        for rank, state in enumerate(states):
            state["rank"] = float(rank)


def rank(state: State) -> float:
    return state.get("rank", -1.0)


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


async def test_a_sync_score_group_hook_runs() -> None:
    scores = await SyncRanker(funcs=[rank]).score_rollouts(**batch([{}, {}]))
    assert scores.metrics["rank"] == [0.0, 1.0]
