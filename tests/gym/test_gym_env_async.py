"""The Gym adapter's async API and the play helpers, driven as asyncio code drives them:
episodes whose async cleanup must run on the loop that opened them, cancelled steps,
and policies that raise, are interrupted or are cancelled mid-episode."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from gym_test_envs import GuessEnv, LeasedGuessEnv, Ledger, bisect_policy

from vfgym.gym import GymEnv, GymVectorEnv, aplay_episode, aplay_vector, play_episode, play_vector
from vfgym.types import Messages, State


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def leased(ledger: Ledger) -> Iterator[GymEnv]:
    env = GymEnv(LeasedGuessEnv(ledger))
    yield env
    env.close()


# ----------------------------------------------- close / aclose: the episode's own loop


def test_close_ends_an_episode_opened_by_areset_on_the_loop_that_opened_it(leased, ledger):
    """`close()` ran the async cleanup on the env's private loop: what the episode's hooks
    opened on the caller's loop (a sandbox lease) was given back on the wrong loop."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(leased.areset(seed=0))
        leased.close()
        assert ledger.running() == [] and ledger.misplaced() == {}
    finally:
        loop.close()


def test_aclose_on_another_loop_ends_the_episode_on_the_loop_that_opened_it(leased, ledger):
    """The same for `aclose()` awaited on a second loop, and for an episode that `reset()`
    started on the env's private loop and `aclose()` ends from asyncio code."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(leased.areset(seed=0))
        asyncio.run(leased.aclose())
        assert ledger.running() == [] and ledger.misplaced() == {}
        leased.reset(seed=1)
        leased.step("10")
        asyncio.run(leased.aclose())
        assert ledger.running() == [] and ledger.misplaced() == {}
    finally:
        loop.close()


async def test_a_sync_close_in_a_notebook_says_to_await_aclose(leased, ledger):
    """In a notebook (a running loop), `close()` after `await env.areset()` cannot run the
    cleanup on that loop; it must say so and change nothing, not clean up elsewhere."""
    await leased.areset(seed=0)
    with pytest.raises(RuntimeError, match=r"running in this thread.*await env\.aclose\(\)"):
        leased.close()
    assert ledger.running() == [0]
    observation, *_ = await leased.astep("10")  # the episode goes on
    assert "10" in observation
    await leased.aclose()
    assert ledger.running() == [] and ledger.misplaced() == {}


def test_close_from_another_thread_while_the_episodes_loop_runs_says_where_to_end_it(
    leased, ledger
):
    opened, release = threading.Event(), threading.Event()

    async def hold() -> None:
        await leased.areset(seed=0)
        opened.set()
        await asyncio.to_thread(release.wait)
        await leased.aclose()

    thread = threading.Thread(target=asyncio.run, args=(hold(),))
    thread.start()
    try:
        assert opened.wait(10)
        with pytest.raises(RuntimeError, match=r"running in another thread.*on that loop"):
            leased.close()
    finally:
        release.set()
        thread.join(10)
    assert ledger.running() == [] and ledger.misplaced() == {}


# -------------------------------------------------------------- cancelled steps


class SlowReplyEnv(GuessEnv):
    """Async setup, a slow sync `env_response` (in the offloader's worker thread)."""

    def __init__(self, **kwargs: Any) -> None:
        self.log: list[str] = []
        self.replying = threading.Event()
        super().__init__(**kwargs)

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        return GuessEnv.setup_state(self, state)

    def env_response(self, messages: Messages, state: State, **kwargs: Any) -> tuple[Any, State]:
        self.log.append("reply starts")
        self.replying.set()
        time.sleep(0.3)
        self.log.append("reply ends")
        return GuessEnv.env_response(self, messages, state)

    def cleanup_state(self, state: State, **kwargs: Any) -> None:
        self.log.append("cleanup")


async def test_a_step_after_a_cancelled_astep_says_the_episode_was_cancelled():
    """A step cancelled mid-hook (as `asyncio.wait_for` cancels it) ends the episode: its
    cleanup runs once, after the hook's thread finished; the next step said only "stop
    reason: error"."""
    env = GymEnv(SlowReplyEnv())
    try:
        await env.areset(seed=0)
        step = asyncio.ensure_future(env.astep("10"))
        await asyncio.to_thread(env.environment.replying.wait, 10)
        step.cancel()
        with pytest.raises(asyncio.CancelledError):
            await step
        assert env.environment.log == ["reply starts", "reply ends", "cleanup"]
        with pytest.raises(gym.error.ResetNeeded, match=r"cancelled.*call reset\(\)"):
            await env.astep("11")
        await env.areset(seed=1)
    finally:
        await env.aclose()
    assert env.environment.log.count("cleanup") == 2


async def test_aclose_while_an_astep_runs_says_to_let_it_finish():
    """The refusal told a user closing the env to use a vector env."""
    env = GymEnv(SlowReplyEnv())
    await env.areset(seed=0)
    step = asyncio.ensure_future(env.astep("10"))
    await asyncio.to_thread(env.environment.replying.wait, 10)
    with pytest.raises(RuntimeError, match=r"aclose\(\).*still running.*let it finish"):
        await env.aclose()
    await step
    await env.aclose()
    assert env.environment.log == ["reply starts", "reply ends", "cleanup"]


async def test_a_twice_cancelled_astep_cleans_up_after_the_hooks_thread():
    env = GymEnv(SlowReplyEnv())
    await env.areset(seed=0)
    step = asyncio.ensure_future(env.astep("10"))
    await asyncio.to_thread(env.environment.replying.wait, 10)
    step.cancel()
    await asyncio.sleep(0.05)
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    log = list(env.environment.log)
    await asyncio.sleep(0.4)
    await env.aclose()
    assert log == ["reply starts", "reply ends", "cleanup"]


# ------------------------------------------------- play helpers: policies that raise


def _interrupting(observation: str) -> str:
    raise KeyboardInterrupt


def _broken(observation: str) -> str:
    raise ValueError("the model server answered 500")


async def _abroken(observation: str) -> str:
    await asyncio.sleep(0)
    raise ValueError("the model server answered 500")


def _bad_action(observation: str) -> Any:
    return 42


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        (_broken, ValueError),
        (_abroken, ValueError),  # played on a helper loop that closes when it returns
        (_interrupting, KeyboardInterrupt),
        (_bad_action, TypeError),
    ],
)
def test_play_episode_ends_the_episode_when_the_policy_fails(leased, ledger, policy, error):
    """The episode was left running: after an async policy, on a loop already closed, so
    its cleanup could never give back what the hooks opened there."""
    with pytest.raises(error):
        play_episode(leased, policy, seed=0)
    assert leased.episode_over
    assert ledger.running() == [] and ledger.misplaced() == {}
    trajectory = play_episode(leased, bisect_policy, seed=0)  # the env is still usable
    assert trajectory.done


@pytest.mark.parametrize("wrapped", [False, True])
async def test_aplay_episode_ends_the_episode_when_it_is_cancelled(ledger, wrapped):
    """Cancelled while the policy waits on its model (`asyncio.wait_for`), the episode
    was left running; wrapped envs are stepped in a worker thread on their own loop."""
    gym_env = GymEnv(LeasedGuessEnv(ledger))
    env: gym.Env = gym.wrappers.TimeLimit(gym_env, 20) if wrapped else gym_env
    never = asyncio.Event()

    async def waiting(observation: str) -> str:
        await never.wait()
        return "10"

    try:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(aplay_episode(env, waiting, seed=0), 0.2)
        assert gym_env.episode_over
        assert ledger.running() == [] and ledger.misplaced() == {}
    finally:
        await gym_env.aclose()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_play_vector_ends_its_episodes_on_keyboard_interrupt(ledger, mode):
    """`play_vector` promises to end the episodes it leaves when it raises; it did for an
    Exception only, not for Ctrl-C in the policy."""
    vec = GymVectorEnv([GymEnv(LeasedGuessEnv(ledger)) for _ in range(2)], mode=mode)
    try:
        with pytest.raises(KeyboardInterrupt):
            play_vector(vec, _interrupting, seed=0)
        assert ledger.running() == [] and ledger.misplaced() == {}
        assert len(play_vector(vec, bisect_policy, seed=0)) == 2
    finally:
        vec.close()


def test_aplay_vector_cancelled_in_asyncio_run_leaves_no_episode_on_the_closed_loop(ledger):
    vec = GymVectorEnv([GymEnv(LeasedGuessEnv(ledger)) for _ in range(2)], mode="async")

    async def waiting(observation: str) -> str:
        await asyncio.Event().wait()  # a model that never answers
        return "10"

    async def main() -> None:
        await asyncio.wait_for(aplay_vector(vec, waiting, seed=0), 0.2)

    try:
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(main())
        assert ledger.running() == [] and ledger.misplaced() == {}
        assert len(play_vector(vec, bisect_policy, seed=0)) == 2
    finally:
        vec.close()
