"""Small async helpers shared by every layer.

User code (reward functions, tools, hooks) may be sync or async. Sync user code
that may block runs in a worker thread so it never stalls the event loop that
thousands of rollouts share; cheap framework hooks can opt to run inline.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from types import CoroutineType
from typing import Any, TypeVar, overload

T = TypeVar("T")


def is_async_callable(func: Callable[..., Any]) -> bool:
    """True for `async def` functions, bound methods and callables with an async `__call__`."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - callable objects are allowed here
    )


@overload
async def call_offloaded(func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T: ...
@overload
async def call_offloaded(
    func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any
) -> T: ...
async def call_offloaded(func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
    """Call sync or async user code without blocking the event loop.

    Async callables are awaited directly. Sync ones run in the loop's default
    thread pool (with the caller's context variables), because user code such as a
    reward function or a tool may do blocking I/O or heavy computation.
    """
    if is_async_callable(func):
        return await func(*args, **kwargs)  # type: ignore[misc]
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    result = await loop.run_in_executor(None, ctx.run, called_safely, func, args, kwargs)
    if inspect.isawaitable(result):
        return await result
    return result  # type: ignore[return-value]


def stop_iteration_error(func: Callable[..., Any]) -> RuntimeError:
    """What a StopIteration escaping user code `func` is raised as.

    asyncio cannot pass a StopIteration from a worker thread (or a coroutine) on to
    the task awaiting it: the task would wait forever. A `next()` without a default
    on an exhausted iterator is the usual cause, so the message says so."""
    name = getattr(func, "__qualname__", None) or repr(func)
    return RuntimeError(
        f"{name} raised StopIteration, which asyncio cannot pass on; if it calls next() "
        "on an iterator that may be exhausted, give next() a default"
    )


def called_safely(func: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    """`func(*args, **kwargs)`, with a StopIteration raised as `stop_iteration_error`."""
    try:
        return func(*args, **kwargs)
    except StopIteration as exc:
        raise stop_iteration_error(func) from exc


@overload
async def maybe_await(func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T: ...
@overload
async def maybe_await(func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T: ...
async def maybe_await(func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
    """Call a hook inline and await its result if it returned an awaitable.

    For framework hooks that are cheap state transitions (`env_response` of a
    game, `is_completed`), where a thread hop would cost more than the work.
    """
    result = func(*args, **kwargs)
    # `hasattr(__await__)` is the awaitable protocol itself, and several times
    # cheaper than inspect.isawaitable on this per-turn path.
    if hasattr(result, "__await__"):
        return await result
    return result  # type: ignore[return-value]


class Box:
    """A result holder whose repr costs nothing.

    On Python 3.11 and 3.12, `asyncio.run` and `asyncio.Runner.run` format the
    repr of their main task when they finish (restoring the SIGINT handler builds
    an error message that includes it), and a finished task's repr includes its
    result's. For a `GenerateOutputs` of a thousand multi-turn rollouts that is
    about a second of work; boxing the result keeps it out of that repr.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<Box>"


async def boxed(coro: Awaitable[T]) -> Box:
    """`coro`'s result in a `Box`: run it as `asyncio.run(boxed(coro)).value`."""
    return Box(await coro)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop.

    With no running loop this is `asyncio.run`. Inside one (a notebook, an async
    test) the coroutine runs on a fresh loop in a short-lived thread, because the
    running loop cannot be re-entered from the code it is currently executing.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(boxed(coro)).value

    outcome: dict[str, Any] = {}

    def runner() -> None:
        try:
            outcome["value"] = asyncio.run(boxed(coro)).value
        except BaseException as exc:  # re-raised in the caller's thread below
            outcome["error"] = exc

    thread = threading.Thread(target=runner, name="vfgym-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def in_helper_thread(func: Callable[[], T], *, on_interrupt: Callable[[], Any] | None = None) -> T:
    """`func()` in a short-lived thread, for sync calls made inside a running event loop
    (which cannot be re-entered): the caller's thread waits for it.

    A KeyboardInterrupt (or any exception) while waiting calls `on_interrupt` — which
    should make `func` wind down — and waits for the thread before re-raising, so
    nothing keeps running behind the caller's back."""
    outcome: dict[str, Any] = {}
    # An event, not `thread.join()`: a join that Ctrl-C interrupted takes the thread for
    # finished (CPython's bpo-45274 handling), so a second join would not wait.
    finished = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = func()
        except BaseException as exc:  # re-raised in the caller's thread below
            outcome["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=run, name="vfgym-helper", daemon=True).start()
    try:
        finished.wait()
    except BaseException:
        if on_interrupt is not None:
            on_interrupt()
        finished.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on `loop` (not running) from sync code: in this thread, or in a helper
    thread when this thread already runs a loop, as in a notebook. Always the same
    loop, so what earlier calls opened on it (connections, subprocesses) stays usable.

    Interrupted (Ctrl-C), the coroutine is cancelled and run until it has unwound —
    its cleanup included — before the interrupt propagates: left pending, it would
    resume inside the next call on this loop."""
    task = loop.create_task(coro)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_to_the_end(loop, task)
    return in_helper_thread(
        lambda: _run_to_the_end(loop, task),
        on_interrupt=lambda: loop.call_soon_threadsafe(task.cancel),
    )


def _run_to_the_end(loop: asyncio.AbstractEventLoop, task: asyncio.Task[T]) -> T:
    """`loop.run_until_complete(task)`; interrupted, the task is cancelled and unwound."""
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise


def new_private_loop(owner: object) -> asyncio.AbstractEventLoop:
    """A new event loop for `owner`'s sync calls, closed when `owner` is collected if
    nothing closed it before: an env dropped without `close()` (Gymnasium's
    `check_env` never closes the env it checks) must not leak the loop's sockets."""
    loop = asyncio.new_event_loop()
    weakref.finalize(owner, _close_dropped_loop, loop)
    return loop


def _close_dropped_loop(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        loop.close()


def close_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """Close a private loop as `asyncio.run` closes its own (from any thread): the
    tasks left on it are cancelled and run to their end, then its async generators
    and default executor are shut down.

    A private loop runs only while a call drives it, so work a hook started in the
    background (a sandbox pool refilling itself) is still pending when it closes;
    dropped there, its cleanup would never run (a container being created would
    outlive the process)."""
    if loop is None or loop.is_closed():
        return

    def shut_down() -> None:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        shut_down()
    else:
        in_helper_thread(shut_down)


class SuspendedError(RuntimeError):
    """A coroutine driven inline tried to wait on something; it needs an event loop."""


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends, with no event loop at all.

    An `async def` hook that only does CPU work (a game move) completes on its
    first `send`; driving it directly costs a microsecond, where an event-loop
    round trip costs tens. If the coroutine does suspend, it is closed and
    `SuspendedError` says so: the caller must use an event loop for that hook.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise SuspendedError(
        "a hook awaited real I/O while being driven without an event loop; "
        "call the async API (await env.astep(...)) for this environment"
    )


@overload
def call_inline(func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T: ...
@overload
def call_inline(func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T: ...
def call_inline(func: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
    """`maybe_await` for sync code with no event loop: call a hook that never waits.

    A sync hook's value is returned as it is; an `async def` hook that only
    computes (see `never_suspends`) is driven by `run_inline`, so a turn of a game
    costs no loop and no thread.
    """
    result = func(*args, **kwargs)
    if hasattr(result, "__await__"):
        return settle_inline(result)
    return result  # type: ignore[return-value]


def settle_inline(awaitable: Awaitable[T]) -> T:
    """The value of an awaitable that never suspends (a `never_suspends` hook's result),
    with no event loop; hot paths call a hook directly and settle only awaitables."""
    return run_inline(awaitable if type(awaitable) is CoroutineType else _awaited(awaitable))


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def never_suspends(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark an `async def` hook as pure computation, safe to drive with `run_inline`."""
    func.__vfgym_inline__ = True  # type: ignore[attr-defined]
    return func
