"""Keep the garbage collector from stalling a large batch of rollouts.

Thousands of live rollouts hold millions of objects (messages, raw responses,
States). CPython's full collections scan all of them, again and again as the
batch grows: at 10,000 rollouts a single pause took close to two seconds, and
every rollout on the event loop waited for it. While a large batch runs, the
objects already alive are moved to the collector's permanent generation every
`interval` seconds (`gc.freeze()`, a constant-time list splice), so collections
only examine what is new. Nothing is freed early or kept late by this except
reference cycles that formed before a freeze; they are collected as usual once
the batch ends and `gc.unfreeze()` hands everything back.

The collector is process-wide, so concurrent batches share one freezer; the
last one to finish unfreezes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator

#: Batches at least this large freeze by default (`generate(..., gc_freeze=None)`).
AUTO_FREEZE_ROLLOUTS = 1000
FREEZE_INTERVAL_S = 0.1


class _Freezer:
    """Counts the batches that want freezing; one process, one collector."""

    active = 0


async def _keep_freezing(interval: float) -> None:
    while True:
        gc.freeze()
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def frozen_gc(enabled: bool, interval: float = FREEZE_INTERVAL_S) -> AsyncIterator[None]:
    """While the block runs (and `enabled`), freeze live objects every `interval` seconds."""
    if not enabled:
        yield
        return
    _Freezer.active += 1
    gc.freeze()  # now, before the block allocates anything
    task = asyncio.create_task(_keep_freezing(interval))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        _Freezer.active -= 1
        if _Freezer.active == 0:
            gc.unfreeze()


__all__ = ["AUTO_FREEZE_ROLLOUTS", "FREEZE_INTERVAL_S", "frozen_gc"]
