"""Sync user code runs inline only while it is quick, and in a thread once it is not."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from vfgym.engine._async import call_offloaded
from vfgym.engine.offload import Offloader
from vfgym.envs import ToolEnv
from vfgym.types import Messages


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


def first_even(numbers: list[int]) -> int:
    """A user's bug: `next()` without a default on an iterator that may be empty."""
    return next(n for n in numbers if n % 2 == 0)


@pytest.mark.parametrize("mode", ["auto", "always", "never"])
async def test_a_sync_function_raising_stop_iteration_fails_instead_of_hanging(mode: str) -> None:
    """StopIteration cannot be set on an asyncio future: from a worker thread it used to
    leave the awaiting rollout pending forever (the loop only logged a TypeError)."""
    offloader = Offloader(mode)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"first_even raised StopIteration.*default") as caught:
        await asyncio.wait_for(offloader.call(first_even, [1, 3]), 2)
    assert isinstance(caught.value.__cause__, StopIteration)
    if mode == "auto":  # and once the function runs inline, the same error
        assert await offloader.call(first_even, [2]) == 2
        assert offloader.verdict(first_even) == "inline"
        with pytest.raises(RuntimeError, match="first_even raised StopIteration"):
            await offloader.call(first_even, [1])


async def test_a_tool_raising_stop_iteration_is_reported_to_the_model(model_server) -> None:
    def lookup(key: str) -> str:
        """Find the entry for a key."""
        return next(k for k in ["a"] if k == key)

    def policy(messages: Messages) -> object:
        if messages[-1]["role"] == "tool":
            return "done"
        call = {"name": "lookup", "arguments": json.dumps({"key": "zz"})}
        return {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": call}],
        }

    server = await model_server(policy)
    env = ToolEnv(dataset=[{"question": "q", "answer": "a"}], tools=[lookup], max_turns=3)
    out = await asyncio.wait_for(env.evaluate(server.client(), "m"), 3)
    tool_message = out.completion[0][1]
    assert tool_message["role"] == "tool"
    assert "StopIteration" in tool_message["content"]
    assert out.state[0]["stop_reason"] == "completed"


async def test_awaiting_a_plain_defs_awaitable_is_not_counted_as_blocking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plain def that returns a coroutine (a lambda around an async judge) blocks the
    loop only while it builds the coroutine; the await lets the loop run. Timing the
    await too moved it to the thread with a false 'took N ms on the event loop'."""

    async def judge() -> float:
        await asyncio.sleep(0.12)  # past offload_above, spent awaiting
        return 1.0

    def reward() -> object:
        return judge()

    offloader = Offloader(**TOLERANT)
    assert [await offloader.call(reward) for _ in range(3)] == [1.0] * 3
    assert offloader.verdict(reward) == "inline"
    assert "event loop" not in caplog.text


def test_a_late_quick_sample_does_not_undo_a_settled_thread_verdict() -> None:
    """Concurrent rollouts: calls that started before the verdict was settled finish
    after it; a quick one among them used to put a slow function back inline."""
    delays = iter([0.12, 0.12, 0.0])  # one worker: they run, and finish, in this order

    def sometimes_slow() -> None:
        time.sleep(next(delays))

    async def main() -> str:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        offloader = Offloader(**TOLERANT)
        await asyncio.gather(*(offloader.call(sometimes_slow) for _ in range(3)))
        return offloader.verdict(sometimes_slow)

    assert asyncio.run(main()) == "thread"  # two slow in a row settled it


async def test_call_offloaded_raises_a_stop_iteration_instead_of_hanging() -> None:
    """The thread hop behind ModelServer(offload_sync=True) policies and the judge."""

    def exhausted() -> int:
        return next(iter(()))

    with pytest.raises(RuntimeError, match=r"exhausted raised StopIteration.*next\(\) a default"):
        await asyncio.wait_for(call_offloaded(exhausted), timeout=10)
