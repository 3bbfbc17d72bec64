"""Sync user code runs inline only while it is quick, and in a thread once it is not."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from vfgym.engine.offload import Offloader


def where() -> str:
    return "loop" if threading.current_thread() is threading.main_thread() else "thread"


# Thresholds far above scheduling jitter, so a loaded machine cannot turn a
# quick call into a slow one.
TOLERANT = {"inline_below": 0.05, "offload_above": 0.1}


async def test_a_quick_function_moves_inline_after_its_first_call() -> None:
    offloader = Offloader(**TOLERANT)
    assert offloader.verdict(where) == "unknown"
    places = [await offloader.call(where) for _ in range(3)]
    assert places == ["thread", "loop", "loop"]
    assert offloader.verdict(where) == "inline"


async def test_a_slow_function_stays_in_the_thread() -> None:
    def slow() -> str:
        time.sleep(0.01)
        return where()

    offloader = Offloader()
    assert [await offloader.call(slow) for _ in range(3)] == ["thread"] * 3
    assert offloader.verdict(slow) == "thread"


async def test_a_function_that_turns_slow_is_moved_off_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    delays = iter([0.0, 0.0, 0.0, 0.2, 0.2, 0.0])

    def turns_slow() -> str:
        time.sleep(next(delays))
        return where()

    offloader = Offloader(**TOLERANT)
    places = [await offloader.call(turns_slow) for _ in range(6)]
    # first call timed in the thread, then inline; two slow calls in a row move it
    assert places == ["thread", "loop", "loop", "loop", "loop", "thread"]
    assert offloader.verdict(turns_slow) == "thread"
    assert "turns_slow" in caplog.text and "worker thread" in caplog.text


async def test_isolated_slow_calls_are_forgiven(caplog: pytest.LogCaptureFixture) -> None:
    """A pause that stretches one call (GC, a preempted VM) must not cost the hop forever."""
    delays = iter([0.2, 0.0] + [0.2, 0.0, 0.0] * 3)

    def hiccups() -> str:
        time.sleep(next(delays))
        return where()

    offloader = Offloader(**TOLERANT)
    places = [await offloader.call(hiccups) for _ in range(11)]
    # a slow first sample in the thread, a quick second one: inline from then on
    assert places == ["thread", "thread"] + ["loop"] * 9
    assert offloader.verdict(hiccups) == "inline"
    assert "worker thread" not in caplog.text


async def test_the_loop_keeps_running_while_a_slow_function_runs() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    def blocking() -> int:
        time.sleep(0.1)
        return 1

    task = asyncio.create_task(ticker())
    try:
        await Offloader().call(blocking)
    finally:
        task.cancel()
    assert ticks >= 5


async def test_modes_always_and_never() -> None:
    always, never = Offloader("always"), Offloader("never")
    assert [await always.call(where) for _ in range(3)] == ["thread"] * 3
    assert [await never.call(where) for _ in range(3)] == ["loop"] * 3


async def test_async_callables_are_awaited_and_methods_share_a_verdict() -> None:
    class Tools:
        def quick(self) -> str:
            return where()

        async def coro(self) -> str:
            return "awaited"

    offloader = Offloader(**TOLERANT)
    first, second = Tools(), Tools()
    assert await offloader.call(first.coro) == "awaited"
    assert await offloader.call(first.quick) == "thread"
    assert await offloader.call(second.quick) == "loop"  # same function, same verdict


async def test_an_error_propagates_and_leaves_no_verdict() -> None:
    def broken() -> None:
        raise KeyError("nope")

    offloader = Offloader()
    with pytest.raises(KeyError, match="nope"):
        await offloader.call(broken)
    assert offloader.verdict(broken) == "unknown"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="'auto', 'always' or 'never'"):
        Offloader("sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inline_below"):
        Offloader(inline_below=0.01, offload_above=0.001)
