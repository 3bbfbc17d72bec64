"""Where sync user code runs: inline while it is cheap, in a worker thread once it is not.

A thread hop costs about 0.1 ms; a typical reward function or tool (a string
comparison, a dict lookup) costs a microsecond. Sending every call through a
thread would make that hop most of a rollout's cost, while running everything
inline would let one slow function stall every rollout sharing the loop. So each
function earns its place:

- its first calls run in a worker thread, where they are timed; once one is
  quick (under `inline_below`), later calls run inline, still timed; two slow
  ones in a row settle it in the thread;
- an inline function that is slow (over `offload_above`) on two calls in a row
  runs in the thread from then on, and a warning names it.

"Two in a row" because one slow call proves nothing: a garbage-collector pause,
or the machine (a virtual one above all) taking the CPU away for a few
milliseconds, can stretch any call, and a function wrongly sent to the thread
pays the hop on every call after. A function that is really slow is slow on
consecutive calls. The loop is thus blocked at most twice in a row per
function. `mode="always"` never runs sync code inline (the strict choice for
functions that may block on I/O); `mode="never"` always does.

Only the sync call itself is timed: when a plain function returns an awaitable
(a lambda around an async judge), awaiting it lets the loop run, so that wait
is no evidence of blocking. A verdict, once given, is changed only by calls made
under it: calls that started before it (concurrent rollouts) and finish after it
do not overturn it.

A StopIteration escaping user code (a `next()` without a default) is raised as
a RuntimeError naming the function: asyncio cannot carry a StopIteration from a
worker thread to the awaiting task, which would wait forever.

Time limits (`call_limited`): an async callable past its limit is cancelled. A sync
one cannot be stopped, so under a limit it always runs in a worker thread (never
inline: there no limit could fire) and, past the limit, is abandoned: its thread runs
on until the function returns, and what it returns or raises then is discarded.
Those calls run in a pool of the Offloader's own, never in the event loop's default
executor, which the rest of the process (DNS look-ups, `asyncio.to_thread`) relies
on. An abandoned thread stops counting as one of the pool's `limited_workers`, so a
replacement serves the next call; at most `max_abandoned` of them may run at once,
and past that a limited sync call is refused (AbandonedThreadsError) rather than
started, so a function that never returns costs a bounded number of threads.
A limit counts from the moment the call starts running: time spent waiting for a
free worker is not charged to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, overload

from vfgym.engine._async import called_safely, is_async_callable, stop_iteration_error
from vfgym.engine.limited_pool import LIMITED_WORKERS, MAX_ABANDONED, Job, LimitedPool
from vfgym.errors import AbandonedThreadsError, CallTimeoutError

T = TypeVar("T")
OffloadMode = Literal["auto", "always", "never"]
logger = logging.getLogger(__name__)

_UNKNOWN, _INLINE, _THREAD = 0, 1, 2
#: Slow calls in a row that settle a function in the thread.
STRIKES = 2


def function_key(func: Callable[..., Any]) -> Any:
    """The object a function's verdict is kept under (bound methods share their function)."""
    return getattr(func, "__func__", func)


class Offloader:
    """Runs sync or async callables without letting slow sync code stall the event loop."""

    def __init__(
        self,
        mode: OffloadMode = "auto",
        *,
        inline_below: float = 0.0005,
        offload_above: float = 0.002,
        limited_workers: int = LIMITED_WORKERS,
        max_abandoned: int = MAX_ABANDONED,
    ) -> None:
        if mode not in ("auto", "always", "never"):
            raise ValueError(f"offload mode must be 'auto', 'always' or 'never', not {mode!r}")
        if not 0 < inline_below <= offload_above:
            raise ValueError("need 0 < inline_below <= offload_above (seconds)")
        for name, count in (("limited_workers", limited_workers), ("max_abandoned", max_abandoned)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(
                    f"{name} must be a whole number of threads, at least 1; got {count!r}"
                )
        self.limited_workers = limited_workers
        self.max_abandoned = max_abandoned
        self._limited: LimitedPool | None = None  # made on the first limited sync call
        self.mode: OffloadMode = mode
        self.inline_below = inline_below
        self.offload_above = offload_above
        self._verdicts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._strong: dict[Any, int] = {}  # for callables that cannot be weakly referenced
        self._strikes: dict[Any, int] = {}  # slow calls in a row so far, by key

    @property
    def abandoned_calls(self) -> int:
        """Calls given up at their time limit whose threads still run."""
        return 0 if self._limited is None else self._limited.abandoned

    def verdict(self, func: Callable[..., Any]) -> str:
        """ "inline", "thread" or "unknown": how the next sync call of `func` runs."""
        verdict = self._get(function_key(func))
        return {_UNKNOWN: "unknown", _INLINE: "inline", _THREAD: "thread"}[verdict]

    def runs_inline(self, key: Any) -> bool:
        """True when the next sync call kept under `key` runs inline (`call_as`'s key):
        a caller that must wrap a thread's call (to wait for it on cancellation) can
        skip the wrapping for a quick function."""
        if self.mode != "auto":
            return self.mode == "never"
        return self._get(key) == _INLINE

    def _get(self, key: Any) -> int:
        # Keys that cannot be weakly referenced (the tuples a rubric uses) are found
        # in `_strong` first, without the TypeError a weak lookup would raise.
        verdict = self._strong.get(key)
        if verdict is not None:
            return verdict
        try:
            return self._verdicts.get(key, _UNKNOWN)
        except TypeError:
            return _UNKNOWN

    def _set(self, key: Any, verdict: int) -> None:
        try:
            self._verdicts[key] = verdict
        except TypeError:
            self._strong[key] = verdict

    @overload
    async def call(self, func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T: ...
    @overload
    async def call(
        self, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...
    async def call(self, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Await an async callable; run a sync one inline or in a thread (see the module)."""
        return await self.call_as(function_key(func), func, *args, **kwargs)

    @overload
    async def call_as(
        self, key: Any, func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...
    @overload
    async def call_as(
        self, key: Any, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...
    async def call_as(
        self, key: Any, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T:
        """`call`, keeping the verdict under `key` (a hashable object), not under `func`.

        For a runner that calls several user functions in one go: the verdict
        belongs to that group, not to the runner.
        """
        verdict = self._get(key) if self.mode == "auto" else _UNKNOWN
        if verdict == _UNKNOWN and is_async_callable(func):  # a verdict implies sync
            return await func(*args, **kwargs)  # type: ignore[misc]
        if self.mode == "never":
            return await _settle(called_safely(func, args, kwargs))
        if self.mode == "always":
            verdict = _THREAD
        if verdict == _INLINE:
            start = time.perf_counter()
            try:
                result = func(*args, **kwargs)
            except StopIteration as exc:
                raise stop_iteration_error(func) from exc
            finally:
                # The sync call alone: awaiting what it returned does not block the loop.
                elapsed = time.perf_counter() - start
                if elapsed > self.offload_above:
                    if self._strike(key):
                        logger.warning(
                            "%s took %.1f ms on the event loop; it runs in a worker thread "
                            "from now on",
                            getattr(func, "__qualname__", func),
                            elapsed * 1000,
                        )
                elif self._strikes:
                    self._strikes.pop(key, None)
            if hasattr(result, "__await__"):
                return await result  # type: ignore[no-any-return]
            return result  # type: ignore[return-value]
        result, elapsed = await _in_thread(func, args, kwargs)
        # Only a sample taken while the verdict was open decides it, and only while it
        # still is: a call that began before concurrent ones settled it says nothing new.
        if verdict == _UNKNOWN and self._get(key) == _UNKNOWN:
            if elapsed < self.inline_below:
                self._strikes.pop(key, None)
                self._set(key, _INLINE)
            else:
                self._strike(key)
        return await _settle(result)

    @overload
    async def call_waited(
        self, key: Any, func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...
    @overload
    async def call_waited(
        self, key: Any, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...
    async def call_waited(
        self, key: Any, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T:
        """`call_as`, except that a call in a worker thread is waited for when the caller
        is cancelled; the cancellation goes on once it has returned.

        For hooks that must not overlap with the cleanup that follows a cancellation
        (`MultiTurnEnv`'s `setup_state`, `env_response`, `cleanup_state`): cleanup sees
        all that the hook did and never runs at the same time. A call that runs inline
        cannot be interrupted, so it needs no such wait (nor the task it costs).
        """
        if self.runs_inline(key):
            return await self.call_as(key, func, *args, **kwargs)
        job = asyncio.ensure_future(self.call_as(key, func, *args, **kwargs))
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            while not job.done():  # a second cancellation does not cut the wait short
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([job])
            if not job.cancelled():
                job.exception()  # seen: the cancellation is what goes on
            raise

    @overload
    async def call_limited(
        self, limit: float | None, func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...
    @overload
    async def call_limited(
        self,
        limit: float | None,
        func: Callable[..., T | Awaitable[T]],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> T: ...
    async def call_limited(
        self,
        limit: float | None,
        func: Callable[..., T | Awaitable[T]],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> T:
        """`call`, given up after `limit` seconds (None: no limit) with CallTimeoutError.

        An async callable is cancelled at the limit; a sync one runs in this
        Offloader's limited pool and is abandoned there (see the module). A
        TimeoutError the callable raises itself passes through as it is.
        """
        if limit is None:
            return await self.call(func, *args, **kwargs)
        if is_async_callable(func):
            return await _within(limit, func(*args, **kwargs))  # type: ignore[arg-type]
        return await self._in_limited_pool(limit, func, args, kwargs)

    async def _in_limited_pool(
        self, limit: float, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """`func` in a limited worker; an awaitable it returns is awaited within the
        same limit. However this ends (a result, the limit, the caller cancelled),
        the job is left finished, abandoned or never started."""
        if self._limited is None:
            self._limited = LimitedPool(self.limited_workers, self.max_abandoned)
        pool = self._limited
        ctx = contextvars.copy_context()
        job = Job(functools.partial(ctx.run, called_safely, func, args, kwargs), func)
        pool.submit(job)
        try:
            if job.queued:
                await job.started  # no worker was free: the limit starts when one is
            return await _within(limit, _settled_job(job))
        finally:
            pool.abandon(job)  # a no-op for a finished job

    def _strike(self, key: Any) -> bool:
        """Count a slow call of `key`'s function; True when that settles it in the thread."""
        strikes = self._strikes.get(key, 0) + 1
        if strikes < STRIKES:
            self._strikes[key] = strikes
            return False
        self._strikes.pop(key, None)
        self._set(key, _THREAD)
        return True


async def _settle(result: Any) -> Any:
    if hasattr(result, "__await__"):
        return await result
    return result


def _timed(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    start = time.perf_counter()
    result = called_safely(func, args, kwargs)
    return result, time.perf_counter() - start


async def _in_thread(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, float]:
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    return await loop.run_in_executor(None, functools.partial(ctx.run, _timed, func, args, kwargs))


async def _within(limit: float, awaitable: Awaitable[T]) -> T:
    """`await awaitable`, cancelled after `limit` seconds with CallTimeoutError.

    `asyncio.timeout`, not `wait_for`: Python 3.11's `wait_for` can lose a
    cancellation of its caller that coincides with the inner call finishing.
    """
    timer = asyncio.timeout(limit)
    try:
        async with timer:
            return await awaitable
    except TimeoutError:
        if timer.expired():
            raise CallTimeoutError(limit) from None
        raise  # the callable's own TimeoutError (a socket's, say)


async def _settled_job(job: Job) -> Any:
    return await _settle(await job.done)


__all__ = [
    "AbandonedThreadsError",
    "CallTimeoutError",
    "LimitedPool",
    "OffloadMode",
    "Offloader",
    "function_key",
]
