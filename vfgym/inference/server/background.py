"""Serving from a background thread: a new event loop, started and stopped from sync code.

The loopback model server and TRL's policy server are both used from synchronous code
(a test, a trainer's step) that must not own an event loop; both serve the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable


def serve_in_thread(
    start: Callable[[], Awaitable[object]],
    stop: Callable[[], Awaitable[object]],
    name: str,
) -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
    """Run `start()` on a new loop in a daemon thread, then the loop until `stop_thread`.

    Returns once `start()` finished, so the caller can use what it set up (a port);
    an exception of `start()` is raised here, in the caller's thread. `stop()` runs on
    the loop when it is stopped, before the loop's async generators and executor are
    shut down and the loop closed.
    """
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as exc:  # handed to the starting thread below
            failure.append(exc)
            started.set()
            loop.close()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(stop())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    started.wait()
    if failure:
        thread.join()
        raise failure[0]
    return thread, loop


def stop_thread(thread: threading.Thread, loop: asyncio.AbstractEventLoop) -> None:
    """Stop a loop `serve_in_thread` runs, and wait for its thread to end."""
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
