"""Vector envs: sync and async give identical episodes, in every autoreset mode."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest
from gym_test_envs import bisect_policy

from vfgym.gym import Trajectory, aplay_vector, play_vector
from vfgym.gym.spaces import SharedTextBatch


def _summary(trajectories: list[Trajectory]) -> list[tuple]:
    """What must match between two runs: everything but wall-clock timings."""
    return sorted(
        (
            tuple(t.observations),
            tuple(t.actions),
            tuple(t.rewards),
            t.terminated,
            t.truncated,
            t.final_info["state"]["example_id"],
            tuple(sorted(t.final_info["metrics"].items())),
        )
        for t in trajectories
    )


def _play(gym_id: str, mode: str, *, episodes: int = 5, **vector_kwargs) -> list[Trajectory]:
    env = gym.make_vec(
        gym_id, num_envs=3, vectorization_mode=mode, vector_kwargs=vector_kwargs or None
    )
    try:
        return play_vector(env, bisect_policy, seed=7, episodes=episodes)
    finally:
        env.close()


def test_sync_and_async_vector_envs_play_identical_episodes():
    sync = _play("vfgym-test/Guess-v0", "sync")
    async_ = _play("vfgym-test/Guess-v0", "async")  # shared memory on, as by default
    assert len(sync) == 5
    assert _summary(sync) == _summary(async_)
    assert {t.terminated for t in sync} == {True, False}  # wins and max_turns both covered
    by_episode = {(t.state["example_id"], tuple(t.actions)): t.state for t in async_}
    for t in sync:  # the State that crossed the process boundary is the same episode's
        assert by_episode[(t.state["example_id"], tuple(t.actions))] == t.state
    assert all(isinstance(t.observations[1], str) for t in async_)


def test_async_vector_env_without_shared_memory_gives_the_same_episodes():
    assert _summary(_play("vfgym-test/Guess-v0", "async", shared_memory=False)) == _summary(
        _play("vfgym-test/Guess-v0", "sync")
    )


@pytest.mark.parametrize("autoreset", ["SameStep", "Disabled"])
def test_other_autoreset_modes_play_the_same_episodes(autoreset):
    mode = gym.vector.AutoresetMode(autoreset)
    reference = _summary(_play("vfgym-test/Guess-v0", "sync"))
    assert _summary(_play("vfgym-test/Guess-v0", "sync", autoreset_mode=mode)) == reference
    assert _summary(_play("vfgym-test/Guess-v0", "async", autoreset_mode=mode)) == reference


def test_messages_mode_vectorises_in_both_modes():
    def policy(messages: list) -> dict:
        return {"role": "assistant", "content": bisect_policy(messages[-1]["content"])}

    results = []
    for mode in ("sync", "async"):
        env = gym.make_vec(
            "vfgym-test/Guess-v0",
            num_envs=2,
            vectorization_mode=mode,
            observation_mode="messages",
        )
        try:
            results.append(play_vector(env, policy, seed=3, episodes=2))
        finally:
            env.close()
    sync, async_ = results
    assert [t.observations for t in sync] == [t.observations for t in async_]
    assert isinstance(async_[0].observations[1], list)
    assert async_[0].observations[1][0]["role"] == "user"


def test_tool_calls_through_an_async_vector_env():
    env = gym.make_vec("vfgym-test/Calculator-v0", num_envs=2, vectorization_mode="async")
    try:
        observations, _ = env.reset(seed=0)
        assert all("Use the add tool" in o for o in observations)
        call = {
            "id": "c",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
        }
        turn = {"role": "assistant", "content": "", "tool_calls": [call]}
        observations, rewards, terminated, truncated, infos = env.step((turn, "no tools"))
        assert observations == ("4", "")
        assert list(terminated) == [False, True] and list(truncated) == [False, False]
        assert list(rewards) == [0.0, 0.0]  # "no tools" answered nothing: reward 0
        assert list(infos["state"][0]["tools_called"]) == ["add"]
    finally:
        env.close()


def test_copy_false_hands_out_a_live_view_of_shared_memory():
    env = gym.make_vec(
        "vfgym-test/Guess-v0",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"copy": False},
    )
    try:
        observations, _ = env.reset(seed=0)
        assert isinstance(observations, SharedTextBatch)
        assert "between 1 and 20" in observations[0]
        env.step(("5", "6"))
        assert observations[0].startswith("5") and observations[1].startswith("6")
        assert tuple(observations) == (observations[0], observations[1])
    finally:
        env.close()


async def test_aplay_vector_runs_an_async_policy_concurrently():
    in_flight = 0
    peak = 0

    async def policy(observation: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return bisect_policy(observation)

    env = gym.make_vec("vfgym-test/Guess-v0", num_envs=3, vectorization_mode="sync")
    try:
        played = await aplay_vector(env, policy, seed=7, episodes=5)
    finally:
        env.close()
    assert peak == 3
    assert _summary(played) == _summary(_play("vfgym-test/Guess-v0", "sync"))
