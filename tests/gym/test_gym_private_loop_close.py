"""Closing a Gym env ends the tasks its hooks left on the env's private event loop.

A hook may start work that outlives its step (a sandbox pool refilling itself in
the background). The private loop runs only while a step runs, so such a task is
still pending when the env closes; closing the loop under it used to drop it
unfinished, its `finally` never run ("Task was destroyed but it is pending!"), and
a container it was creating in a worker thread left behind. It is now cancelled
and run to its end, as `asyncio.run` does with the tasks left on its loop.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from typing import Any

from vfgym.envs import MultiTurnEnv
from vfgym.gym import GymEnv
from vfgym.types import Messages, State


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
