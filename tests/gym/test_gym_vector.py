"""Vector envs: sync and async give identical episodes, in every autoreset mode."""

from __future__ import annotations

import asyncio
import copy
import pickle

import gymnasium as gym
import pytest
from gym_test_envs import bisect_policy

from vfgym.gym import StateView, Trajectory, aplay_vector, play_vector
from vfgym.gym.shipping import _rebuild_view, new_outbox
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


def _step_infos(mode: str, autoreset: str, steps: int) -> list[tuple]:
    env = gym.make_vec(
        "vfgym-test/Guess-v0",
        num_envs=2,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode(autoreset)},
    )
    seen = []
    try:
        observations, infos = env.reset(seed=5)
        if mode == "async":  # the workers do send deltas
            assert env.get_attr("_ship") == (True, True)
        for _ in range(steps):
            observations, _, _, _, infos = env.step(tuple(bisect_policy(o) for o in observations))
            for i in range(2):
                final = infos.get("final_info", {})
                if final.get("_state", [False, False])[i]:
                    final_state = copy.deepcopy(dict(final["state"][i]))
                    seen.append((i, "final", final_state, final["messages"][i]))
                seen.append((i, copy.deepcopy(dict(infos["state"][i])), infos["messages"][i]))
    finally:
        env.close()
    return seen


@pytest.mark.parametrize("autoreset", ["NextStep", "SameStep"])
def test_async_infos_carry_the_same_state_and_messages_at_every_step(autoreset):
    """The State crosses the pipe as deltas; what arrives must be the whole State."""
    sync = _step_infos("sync", autoreset, 16)
    async_ = _step_infos("async", autoreset, 16)
    assert len(sync) == len(async_) >= 32
    for expected, got in zip(sync, async_, strict=True):
        *head, state, messages = expected
        *head_got, state_got, messages_got = got
        assert head == head_got and messages == messages_got
        assert StateView(state) == StateView(state_got)  # equal but for wall-clock timings
        assert messages_got == state_got["prompt"] + state_got["completion"]


def test_state_deltas_do_not_grow_with_the_conversation():
    """After the first step, what a view sends is the step's new messages, not the history."""
    state = {"prompt": [{"role": "user", "content": "x" * 500}], "completion": [], "turn": 0}
    outbox = new_outbox(None, 1)
    sizes = []
    for turn in range(30):
        state["completion"] += [
            {"role": "assistant", "content": str(turn)},
            {"role": "user", "content": f"{turn}: go higher."},
        ]
        state["turn"] = turn + 1
        shipped = pickle.dumps(outbox.pack(state))
        sizes.append(len(shipped))
        view = _rebuild_view(*pickle.loads(shipped))
        assert dict(view) == state
    assert sizes[-1] == pytest.approx(sizes[1], abs=16) and sizes[0] > sizes[1] + 400
