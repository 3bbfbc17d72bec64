"""Daemon worker threads for time-limited sync calls, whose stuck workers can be written off.

A sync function cannot be stopped from outside its thread. So a call past its time
limit (`Offloader.call_limited`) is abandoned: its thread runs on until the function
returns, and what it returns or raises then is discarded. An abandoned thread stops
counting as one of the pool's workers, so a replacement serves the next call; at most
`max_abandoned` of them may run at once, and past that a call is refused
(AbandonedThreadsError) rather than started, so a function that never returns costs a
bounded number of threads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from vfgym.errors import AbandonedThreadsError

logger = logging.getLogger(__name__)

#: Worker threads that run time-limited sync calls at once, per Offloader: the size
#: asyncio's default executor has, so limited calls get the concurrency unlimited ones do.
LIMITED_WORKERS = min(32, (os.cpu_count() or 1) + 4)
#: Threads of calls given up at their limit that may still run, per Offloader. Each
#: costs a thread's stack and whatever it holds; past this, limited calls are refused.
MAX_ABANDONED = 32
#: Seconds an idle worker of the limited pool waits for work before it ends.
IDLE_EXIT_S = 10.0


_QUEUED, _RUNNING, _DONE, _CANCELLED, _ABANDONED = range(5)


class Job:
    """One limited sync call: what to run, and the futures its loop waits on."""

    __slots__ = ("done", "func", "loop", "queued", "run", "started", "state")

    def __init__(self, run: Callable[[], Any], func: Callable[..., Any]) -> None:
        self.run = run
        self.func = func
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[Any] = self.loop.create_future()
        self.started: asyncio.Future[None] = self.loop.create_future()
        self.state = _QUEUED
        self.queued = False  # True when it had to wait for a worker

    def tell(self, future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
        """Settle `future` on its loop, from a worker thread; a closed loop has no one
        waiting any more."""
        try:
            self.loop.call_soon_threadsafe(_settle_future, future, outcome)
        except RuntimeError:
            pass


def _settle_future(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():  # the caller gave up (its limit, a cancellation)
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class LimitedPool:
    """Daemon worker threads for time-limited sync calls, whose stuck workers can be
    written off (see the module).

    Daemon threads: an abandoned call that never returns must not keep the process
    from exiting. The counts are kept under one lock: `_live` workers that are not
    abandoned, `_idle` ones waiting with no job promised to them, `_waiting` jobs
    queued with no worker promised to them, `_abandoned` threads still running a call
    given up on.
    """

    def __init__(self, max_workers: int, max_abandoned: int) -> None:
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._live = self._idle = self._waiting = self._abandoned = 0

    @property
    def abandoned(self) -> int:
        return self._abandoned

    def submit(self, job: Job) -> None:
        """Queue `job` for a worker (an idle one, a new one, else the next one free);
        AbandonedThreadsError when `max_abandoned` threads are still stuck."""
        with self._lock:
            if self._abandoned >= self.max_abandoned:
                calls = (
                    "1 earlier call" if self._abandoned == 1 else f"{self._abandoned} earlier calls"
                )
                raise AbandonedThreadsError(
                    f"{calls} given up at the time limit still running in worker threads is "
                    f"the most this environment allows ({self.max_abandoned}), so no more are "
                    "started until some of them finish"
                )
            spawn = False
            if self._idle:
                self._idle -= 1
            elif self._live < self.max_workers:
                self._live += 1
                spawn = True
            else:
                self._waiting += 1
                job.queued = True
        if spawn:
            self._start_worker()
        self._jobs.put(job)

    def abandon(self, job: Job) -> None:
        """Give up on `job`: a queued one never starts; a running one's thread is written
        off (its outcome discarded) and, if calls wait, a new worker takes its place."""
        with self._lock:
            if job.state == _QUEUED:
                job.state = _CANCELLED
                return
            if job.state != _RUNNING:
                return
            job.state = _ABANDONED
            self._live -= 1
            self._abandoned += 1
            abandoned = self._abandoned
            spawn = self._waiting > 0
            if spawn:
                self._waiting -= 1
                self._live += 1
        name = getattr(job.func, "__qualname__", None) or repr(job.func)
        logger.debug("gave up on %s at its time limit; its thread runs on", name)
        if abandoned >= self.max_abandoned:
            logger.warning(
                "%d calls given up at their time limit still run in worker threads (%s the "
                "last); no more limited calls start until some finish. A function that can "
                "block for ever needs a timeout of its own (a socket's, a subprocess's)",
                abandoned,
                name,
            )
        if spawn:
            self._start_worker()

    def _start_worker(self) -> None:
        """Start one worker, already counted in `_live`; a failed start un-counts it."""
        try:
            threading.Thread(target=self._work, name="vfgym-limited", daemon=True).start()
        except BaseException:
            with self._lock:
                self._live -= 1
            raise

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # no job is promised to an idle worker: this one can go
                        self._idle -= 1
                        self._live -= 1
                        return
                continue
            if not self._begin(job):
                with self._lock:
                    self._next_locked()
                continue
            if job.queued:
                job.tell(job.started, (True, None))
            try:
                outcome: tuple[bool, Any] = (True, job.run())
            except BaseException as exc:  # handed to the caller, as an executor does
                outcome = (False, exc)
            if not self._finish(job):
                logger.debug("a call given up at its time limit ended; its outcome is discarded")
                return  # abandoned: this thread ends
            job.tell(job.done, outcome)
            del outcome, job

    def _begin(self, job: Job) -> bool:
        with self._lock:
            if job.state == _CANCELLED:
                return False
            job.state = _RUNNING
            return True

    def _finish(self, job: Job) -> bool:
        """Mark `job` done; False when it was abandoned (this thread then ends)."""
        with self._lock:
            if job.state == _ABANDONED:
                self._abandoned -= 1
                return False
            job.state = _DONE
            self._next_locked()
            return True

    def _next_locked(self) -> None:
        """A worker free again takes the next waiting job, else is idle."""
        if self._waiting:
            self._waiting -= 1
        else:
            self._idle += 1


__all__ = [
    "IDLE_EXIT_S",
    "LIMITED_WORKERS",
    "MAX_ABANDONED",
    "AbandonedThreadsError",
    "LimitedPool",
]
