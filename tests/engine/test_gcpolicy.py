"""Large batches keep the collector's pauses short; the collector is left as found."""

from __future__ import annotations

import asyncio
import gc

from vfgym.engine.gcpolicy import frozen_gc


async def test_live_objects_are_frozen_while_the_block_runs_and_released_after() -> None:
    assert gc.get_freeze_count() == 0
    kept = []
    async with frozen_gc(True, interval=0.01):
        kept.extend([object()] for _ in range(1000))  # tracked containers
        await asyncio.sleep(0.05)
        assert gc.get_freeze_count() >= 1000
    assert gc.get_freeze_count() == 0
    assert len(kept) == 1000


async def test_disabled_leaves_the_collector_alone() -> None:
    async with frozen_gc(False):
        await asyncio.sleep(0.02)
        assert gc.get_freeze_count() == 0


async def test_nested_batches_unfreeze_once_the_last_one_ends() -> None:
    async with frozen_gc(True, interval=0.01):
        async with frozen_gc(True, interval=0.01):
            await asyncio.sleep(0.03)
        await asyncio.sleep(0.03)
        assert gc.get_freeze_count() > 0  # the outer batch still runs
    assert gc.get_freeze_count() == 0


async def test_generate_freezes_on_request_and_leaves_nothing_frozen() -> None:
    import vfgym as vf
    from vfgym.inference.server import ModelServer

    seen: list[int] = []

    async def answer(messages: list[dict]) -> str:
        await asyncio.sleep(0.05)
        seen.append(gc.get_freeze_count())
        return "ok"

    env = vf.SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": "ok"} for i in range(4)])
    async with ModelServer(answer) as server:
        out = await env.evaluate(server.client(), "m", gc_freeze=True)
    assert len(out.state) == 4 and not any(s.get("error") for s in out.state)
    assert max(seen) > 0  # the server runs on the same loop: it saw the frozen objects
    assert gc.get_freeze_count() == 0
