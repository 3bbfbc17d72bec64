"""Offloader edges found by probing: StopIteration, awaitables from plain defs, late samples."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from vfgym.engine._async import call_offloaded
from vfgym.engine.offload import Offloader
from vfgym.envs import ToolEnv
from vfgym.types import Messages

# Thresholds far above scheduling jitter (as in test_offload.py).
TOLERANT = {"inline_below": 0.05, "offload_above": 0.1}


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
