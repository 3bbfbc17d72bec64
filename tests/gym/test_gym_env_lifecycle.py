"""GymEnv across event loops: a new episode must not strand the running one's cleanup."""

from __future__ import annotations

import asyncio

import pytest
from gym_test_envs import LoopHeldGuessEnv

from vfgym.gym import GymEnv


def test_reset_refuses_while_the_episode_is_held_by_another_loop_and_it_ends_there():
    env = GymEnv(LoopHeldGuessEnv())
    loop = asyncio.new_event_loop()  # still open, and holding the episode
    try:
        loop.run_until_complete(env.areset(seed=0))
        first = env.state
        with pytest.raises(RuntimeError, match=r"another event loop.*areset\(\) on that loop"):
            env.reset(seed=1)
        assert env.state is first and not env.episode_over  # nothing changed
        assert env.np_random_seed == 0  # the refused reset left the seed alone
        loop.run_until_complete(env.areset(seed=1))  # ends it on its own loop
        assert first.get("cleanup_error") is None
        assert first["released_on"] == id(loop)
        loop.run_until_complete(env.aclose())
    finally:
        loop.close()


def test_areset_refuses_while_the_episode_is_held_by_the_envs_own_loop():
    env = GymEnv(LoopHeldGuessEnv())
    try:
        env.reset(seed=0)
        first = env.state

        async def start_another() -> None:
            with pytest.raises(RuntimeError, match=r"started with reset\(\).*call reset\(\)"):
                await env.areset(seed=1)

        asyncio.run(start_another())
        assert env.state is first and not env.episode_over
        env.reset(seed=1)  # ends it on the env's own loop
        assert first.get("cleanup_error") is None and "released_on" in first
    finally:
        env.close()


def test_a_new_episode_may_start_anywhere_once_the_last_one_ended():
    env = GymEnv(LoopHeldGuessEnv())
    try:
        env.reset(seed=0, options={"index": 0})  # the number is 1
        assert env.step("1")[2] is True  # won: ended and cleaned up
        asyncio.run(env.areset(seed=1))
        asyncio.run(env.aclose())
        env.reset(seed=2)
        assert env.state.get("cleanup_error") is None
    finally:
        env.close()


def test_play_episode_with_an_async_policy_ends_a_reset_episode_on_the_envs_own_loop():
    """The play helper's episode runs on a helper loop; the episode the user started
    with reset() is ended first where its hooks opened what its cleanup releases."""
    from vfgym.gym import play_episode

    env = GymEnv(LoopHeldGuessEnv())
    try:
        env.reset(seed=0)
        first = env.state

        async def policy(observation: str) -> str:
            await asyncio.sleep(0)
            return "5"

        trajectory = play_episode(env, policy, seed=1)
        assert trajectory.length >= 1 and trajectory.infos[0]["state"]["turn"] >= 0
        assert first.get("cleanup_error") is None
        assert first["released_on"] == id(env._loop)  # ended on the env's own loop
        assert env.state is not first
    finally:
        env.close()
