"""State deltas from vector workers stay right when an environment rewrites its history.

An async vector env's workers send the conversation logs as the part not sent yet. An
environment that edits, drops or re-lists messages already sent must still be received
as exactly the State the worker holds, and as the sync vector env gives it.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from gym_test_envs import GuessEnv, bisect_policy

import vfgym.gym as vgym
from vfgym.gym import StateView, shipping
from vfgym.types import Messages, State

ENVS = 2
STEPS = 8


class ElidingEnv(GuessEnv):
    """Context management: every earlier reply is elided in place once a newer one comes."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        for message in state["completion"]:
            if message["role"] == "user":
                message["content"] = "[elided]"
        return super().env_response(messages, state)


class SlidingWindowEnv(GuessEnv):
    """Keeps only the last two exchanges: from the third turn on, the log keeps its length
    while its messages change (old ones popped off the front, new ones appended)."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        del state["completion"][:-3]
        return super().env_response(messages, state)


class RelistingEnv(GuessEnv):
    """Replaces the completion by a new list with the same messages every turn."""

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        state["completion"] = list(state["completion"])
        return super().env_response(messages, state)


IDS = {
    "vfgym-shipping/Eliding-v0": ElidingEnv,
    "vfgym-shipping/SlidingWindow-v0": SlidingWindowEnv,
    "vfgym-shipping/Relisting-v0": RelistingEnv,
}


@pytest.fixture(scope="module", autouse=True)
def _ids() -> Iterator[None]:
    for gym_id, environment in IDS.items():
        vgym.register(gym_id, environment)
    yield
    for gym_id in IDS:
        gym.registry.pop(gym_id, None)


def _play(gym_id: str, mode: str) -> list[tuple[Any, ...]]:
    """Every step's (State, messages) per env, each State also checked against the worker's."""
    env = gym.make_vec(gym_id, num_envs=ENVS, vectorization_mode=mode)
    seen = []
    try:
        observations, _ = env.reset(seed=5)
        for _ in range(STEPS):
            actions = tuple(bisect_policy(o) for o in observations)
            observations, _, _, _, infos = env.step(actions)
            workers = env.get_attr("state")
            for i in range(ENVS):
                state = copy.deepcopy(dict(infos["state"][i]))
                assert StateView(state) == StateView(workers[i])  # equal but for timings
                assert infos["messages"][i] == state["prompt"] + state["completion"]
                seen.append((i, state, copy.deepcopy(infos["messages"][i])))
    finally:
        env.close()
    return seen


def _assert_async_matches_sync(gym_id: str) -> list[tuple[Any, ...]]:
    sync, async_ = _play(gym_id, "sync"), _play(gym_id, "async")
    assert len(sync) == len(async_) == ENVS * STEPS
    for (i, state, messages), (j, state_got, messages_got) in zip(sync, async_, strict=True):
        assert i == j and messages == messages_got
        assert StateView(state) == StateView(state_got)
    return async_


def test_a_message_edited_in_place_arrives_edited():
    played = _assert_async_matches_sync("vfgym-shipping/Eliding-v0")
    assert any(m["content"] == "[elided]" for _, state, _ in played for m in state["completion"])


def test_a_log_that_keeps_its_length_but_changes_arrives_changed():
    played = _assert_async_matches_sync("vfgym-shipping/SlidingWindow-v0")
    lengths = [len(state["completion"]) for _, state, _ in played]
    assert lengths.count(4) >= 4  # the window was full, so same-length steps happened


def test_a_new_list_with_the_same_history_still_sends_only_the_new_messages():
    _assert_async_matches_sync("vfgym-shipping/Relisting-v0")
    env = gym.make_vec("vfgym-shipping/Relisting-v0", num_envs=1, vectorization_mode="async")
    try:
        env.reset(seed=5)
        _, _, _, _, before = env.step(("10",))
        completion = before["state"][0]["completion"]
        _, _, _, _, after = env.step(("11",))
        assert after["state"][0]["completion"] == env.get_attr("state")[0]["completion"]
        # a tail extends the received log in place (a whole log would be a new list)
        assert after["state"][0]["completion"] is completion
        assert len(completion) == 4
    finally:
        env.close()


def _inbox_states() -> int:
    """How many rebuilt States the main process holds for episodes in flight."""
    return sum(len(episodes) for episodes in shipping._INBOX.values())


def _async_mid_episode(num_envs: int) -> gym.vector.VectorEnv:
    """An async vector env whose sub-envs are all one step into an episode."""
    env = gym.make_vec("vfgym-test/Guess-v0", num_envs=num_envs, vectorization_mode="async")
    env.reset(seed=5)
    env.step(("no guess",) * num_envs)  # not a number: no episode ends
    return env


def test_an_async_vector_env_closed_mid_episode_releases_its_states():
    before, streams = _inbox_states(), set(shipping._INBOX)
    env = _async_mid_episode(3)
    assert _inbox_states() == before + 3
    env.close()
    del env
    gc.collect()
    assert _inbox_states() == before
    assert set(shipping._INBOX) <= streams  # no stream of it left either


def test_a_closed_vector_env_still_referenced_is_released_when_another_one_starts():
    before = _inbox_states()
    closed = _async_mid_episode(2)
    closed.close()
    live = _async_mid_episode(2)
    try:
        assert _inbox_states() == before + 2  # the closed env's two are gone
        # the live env's States still update: its deltas find their base
        _, _, _, _, infos = live.step(("10", "10"))
        workers = live.get_attr("state")
        assert all(infos["state"][i] == StateView(workers[i]) for i in range(2))
        assert infos["state"][0]["turn"] == 2
    finally:
        live.close()
    assert closed.closed
