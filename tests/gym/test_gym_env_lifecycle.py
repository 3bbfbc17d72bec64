"""GymEnv across event loops: a new episode must not strand the running one's cleanup."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from typing import Any

import pytest
from gym_test_envs import GuessEnv, LoopHeldGuessEnv

from vfgym.envs import MultiTurnEnv
from vfgym.gym import GymEnv
from vfgym.types import Messages, State


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


class BackgroundWorkEnv(MultiTurnEnv):
    """Each reply starts a background task that waits on a worker thread."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dataset=[{"question": "go"}], max_turns=3, **kwargs)
        self.release = threading.Event()
        self.ended: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def background(self) -> None:
        try:
            await asyncio.to_thread(self.release.wait, 5.0)  # a slow call in a thread
            self.ended.append("finished")
        except asyncio.CancelledError:
            self.ended.append("cancelled")
            self.release.set()  # (the thread's work is called off, as a sandbox start is)
            raise
        finally:
            self.ended.append("cleaned up")

    async def env_response(self, messages: Messages, state: State, **kwargs: Any):
        self.tasks.append(asyncio.ensure_future(self.background()))
        await asyncio.sleep(0)  # a hook that really waits: the env needs its loop
        return [{"role": "user", "content": "noted"}], state


def test_close_cancels_and_finishes_tasks_left_on_the_private_loop() -> None:
    env = BackgroundWorkEnv()
    gym_env = GymEnv(env)
    gym_env.reset(seed=0)
    gym_env.step("one")
    assert env.tasks and not env.tasks[0].done()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gym_env.close()
        finally:
            env.release.set()  # let the worker thread end either way
        gc.collect()
    assert env.ended == ["cancelled", "cleaned up"]
    assert env.tasks[0].cancelled()
    assert not [w for w in caught if "pending" in str(w.message)]


class _SyncReleaseGuess(GuessEnv):
    """An environment whose `aclose()` releases what it holds without waiting."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.released = 0

    def aclose(self) -> None:
        self.released += 1


def _rows_drawn(env: GymEnv, resets: int) -> list[int]:
    return [env.reset()[1]["state"]["example_id"] for _ in range(resets)]


def test_close_releases_an_environment_whose_aclose_is_sync():
    """`GymEnv.aclose()` accepts an environment's sync `aclose()`; `close()` failed on
    it ("a coroutine was expected") after releasing, and so released again on every
    retry without ever closing."""
    environment = _SyncReleaseGuess()
    env = GymEnv(environment, owns_environment=True)
    env.reset(seed=0)
    env.step("3")
    env.close()
    assert environment.released == 1 and env.episode_over
    assert environment.events[-1][0] == "cleanup"
    env.close()  # closed: nothing runs again
    assert environment.released == 1


def test_a_reset_refused_for_its_options_leaves_the_seed_and_the_episode_alone():
    """A typo in `options` is refused before anything changes, as a refused seed or a
    busy env is: the generator is not reseeded (the rows drawn next are those the
    earlier seed gives) and the running episode goes on."""
    want_env = GymEnv(GuessEnv())
    env = GymEnv(GuessEnv())
    try:
        want_env.reset(seed=7)
        want = _rows_drawn(want_env, 6)
        env.reset(seed=7)
        for options in ({"indx": 0}, {"index": 99}, {"index": "0"}, "index"):
            with pytest.raises((ValueError, IndexError, TypeError)):
                env.reset(seed=123, options=options)  # type: ignore[arg-type]
        assert env.np_random_seed == 7
        assert env.step("3")[4]["turn"] == 1  # the episode still runs
        assert _rows_drawn(env, 6) == want
    finally:
        env.close()
        want_env.close()


async def test_an_areset_refused_for_its_options_leaves_the_seed_alone():
    env = GymEnv(GuessEnv())
    try:
        await env.areset(seed=7)
        with pytest.raises(ValueError, match="unknown option"):
            await env.areset(seed=123, options={"indx": 0})
        assert env.np_random_seed == 7
    finally:
        await env.aclose()
