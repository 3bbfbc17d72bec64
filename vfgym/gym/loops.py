"""Which event loop a `GymEnv` episode runs on, and refusing the calls that would
run its hooks on another.

A layer of `GymEnv` (see `vfgym.gym.env`). Sync calls on an environment whose hooks
may wait run them on the env's private loop (`_drive`); `areset`/`astep` run them on
the caller's. What an episode's hooks opened (a sandbox lease, a client) belongs to
the loop they ran on, so an episode must be stepped, and its async cleanup run,
there; the checks here say which call to make instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

from vfgym.engine._async import close_loop, new_private_loop, run_on
from vfgym.gym.observing import Observing

T = TypeVar("T")


class LoopKeeping(Observing):
    """Driving the adapter's coroutines, and keeping each episode on its loop."""

    __slots__ = ()

    def _drive(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        """Run one of the adapter's coroutines from sync code (hooks that may wait)."""
        self._claim(what)
        try:
            return self._drive_loop(coro)
        finally:
            self._busy = False

    def _drive_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this env's private loop, the same one for every call of an
        episode (from a helper thread inside a running loop, as in a notebook), so
        what the hooks opened on it stays usable from step to step."""
        if self._loop is None or self._loop.is_closed():
            self._loop = new_private_loop(self)
        return run_on(self._loop, coro)

    def _close_loop(self) -> None:
        loop, self._loop = self._loop, None
        close_loop(loop)

    def _holding_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the running episode must end on: the one its hooks opened
        what its async cleanup releases. None when no episode runs, or when its cleanup
        is sync and so can run anywhere."""
        if not (self._async_cleanup and self._episode_running()):
            return None
        return self._episode_loop

    def _end_where_held(
        self, here: asyncio.AbstractEventLoop | None, call: Literal["close", "aclose"]
    ) -> None:
        """End the running episode on the event loop that holds it, when `call` would
        otherwise run its async cleanup on `here`, another loop: only the loop its hooks
        opened things on (a sandbox lease, a client) can give them back. An idle loop runs
        the cleanup now (this thread waits); a running one cannot be entered from here,
        so `call` is refused before anything changes, saying where to end the episode.
        (A closed loop holds nothing any more: the cleanup runs on `here`.)"""
        held = self._holding_loop()
        if held is None or held is here or held.is_closed():
            return
        if held.is_running():
            raise RuntimeError(_unreachable_loop(held, call))
        self._busy = True
        try:
            self._done = True
            run_on(held, self._cleanup(self._state))  # type: ignore[arg-type]
        finally:
            self._busy = False

    def _check_episode_loop(self, call: str = "step") -> None:
        """Refuse to step an episode on another event loop than the one it started on:
        its hooks may hold what they opened there, which no other loop can use."""
        started_on = self._episode_loop
        if started_on is None or started_on.is_closed():  # nothing of it is held there
            return
        if started_on is asyncio.get_running_loop():
            return
        if started_on is self._loop:
            raise RuntimeError(
                "this episode started with reset(), so its hooks run on the env's own "
                f"event loop: call {call}(), not a{call}() (or start it with areset())"
            )
        raise RuntimeError(
            "this episode started on another event loop (with areset() there, or with "
            f"reset()): call a{call}() on that loop or {call}() throughout, and call "
            "areset() to start one on this loop"
        )

    def _check_next_episode_loop(
        self, here: asyncio.AbstractEventLoop | None, call: Literal["reset", "areset"]
    ) -> None:
        """Refuse to start an episode on `here` while the running one is held by another
        open event loop: starting one first cleans up the last, and its cleanup must run
        where its hooks opened what it releases (a sandbox, a client); from any other
        loop it fails and what it held stays taken. (A sync cleanup waits on no loop.)"""
        started_on = self._episode_loop
        if not self._async_cleanup or self._state is None or self._cleaned:
            return
        if started_on is None or started_on is here:
            return
        if started_on.is_closed():  # nothing of it is held there
            return
        if started_on is self._loop:
            raise RuntimeError(
                "the running episode started with reset(), so its hooks run on the env's "
                "own event loop: call reset() to start the next one there (or end this "
                f"one with truncate() or close() first), not {call}()"
            )
        raise RuntimeError(
            "the running episode started on another event loop, which holds what its "
            "hooks opened: end it there first (await env.areset() on that loop starts "
            "the next one, or await env.aclose()/atruncate() there), then call "
            f"{call}() here"
        )


def _unreachable_loop(loop: asyncio.AbstractEventLoop, call: str) -> str:
    """Why `call` (close or aclose) cannot end an episode held by `loop`, which is
    running, and what to do instead."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if loop is here:
        return (
            f"{call}(): this episode started on the event loop running in this thread (with "
            "areset()/astep()), and its async cleanup_state must run there to give back what "
            "its hooks opened, which a sync call made from that loop cannot do: use "
            "`await env.aclose()`"
        )
    return (
        f"{call}(): this episode started on an event loop running in another thread, and "
        "its async cleanup_state must run there to give back what its hooks opened: end it "
        f"on that loop first (`await env.aclose()` there), then call {call}() here if needed"
    )
