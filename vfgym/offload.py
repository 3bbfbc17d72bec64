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
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from vfgym._async import called_safely, is_async_callable, stop_iteration_error

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
    ) -> None:
        if mode not in ("auto", "always", "never"):
            raise ValueError(f"offload mode must be 'auto', 'always' or 'never', not {mode!r}")
        if not 0 < inline_below <= offload_above:
            raise ValueError("need 0 < inline_below <= offload_above (seconds)")
        self.mode: OffloadMode = mode
        self.inline_below = inline_below
        self.offload_above = offload_above
        self._verdicts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._strong: dict[Any, int] = {}  # for callables that cannot be weakly referenced
        self._strikes: dict[Any, int] = {}  # slow calls in a row so far, by key

    def verdict(self, func: Callable[..., Any]) -> str:
        """ "inline", "thread" or "unknown": how the next sync call of `func` runs."""
        verdict = self._get(function_key(func))
        return {_UNKNOWN: "unknown", _INLINE: "inline", _THREAD: "thread"}[verdict]

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

    async def call(self, func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Await an async callable; run a sync one inline or in a thread (see the module)."""
        return await self.call_as(function_key(func), func, *args, **kwargs)

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


__all__ = ["OffloadMode", "Offloader", "function_key"]
