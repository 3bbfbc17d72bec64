"""`ReasoningGymEnv`: seeded reasoning-gym tasks scored by reasoning-gym's own checkers."""

from __future__ import annotations

from typing import Any

import pytest

rg = pytest.importorskip(
    "reasoning_gym", reason="needs the extra: pip install 'vfgym[reasoning-gym]'"
)

from openai import AsyncOpenAI  # noqa: E402

import vfgym as vf  # noqa: E402
from vfgym.envs.reasoninggym_env import ReasoningGymEnv  # noqa: E402
from vfgym.inference.server import ModelServer  # noqa: E402


def test_rows_index_the_generated_entries_and_are_seeded() -> None:
    env = ReasoningGymEnv(gym="basic_arithmetic", num_train_examples=4, num_eval_examples=2, seed=3)
    again = ReasoningGymEnv(
        gym="basic_arithmetic", num_train_examples=4, num_eval_examples=2, seed=3
    )
    assert [row["answer"] for row in env.get_dataset()] == ["0", "1", "2", "3"]
    assert [row["answer"] for row in env.get_eval_dataset()] == ["4", "5"]
    assert env.get_dataset()[0]["prompt"] == again.get_dataset()[0]["prompt"]
    assert env.get_dataset()[0]["task"] == "basic_arithmetic"


def test_a_mixed_gym_takes_names_and_specs() -> None:
    env = ReasoningGymEnv(
        gym=["basic_arithmetic", {"name": "leg_counting", "weight": 1.0, "config": {}}],
        num_train_examples=6,
        num_eval_examples=0,
    )
    assert {row["task"] for row in env.get_dataset()} <= {"basic_arithmetic", "leg_counting"}
    with pytest.raises(ValueError, match="a data set name or a dict"):
        ReasoningGymEnv(gym=[3], num_train_examples=1, num_eval_examples=0)  # type: ignore[list-item]


async def test_the_reward_is_reasoning_gyms_score_of_the_parsed_answer() -> None:
    env = ReasoningGymEnv(gym="basic_arithmetic", num_train_examples=4, num_eval_examples=0, seed=1)
    entries = env.rg_dataset

    def policy(messages: list[dict[str, Any]]) -> str:
        question = messages[-1]["content"]
        index = next(i for i in range(4) if entries[i]["question"] == question)
        answer = entries[index]["answer"] if index % 2 == 0 else "-1"
        return f"<answer>{answer}</answer>"

    async with ModelServer(policy) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        results = await env.evaluate(client, "m", num_examples=4)
    assert results.metrics["check_answer_reward_func"] == [1.0, 0.0, 1.0, 0.0]
    assert results.reward == [1.0, 0.0, 1.0, 0.0]  # the format reward weighs 0
    assert vf.ReasoningGymEnv is ReasoningGymEnv
