"""Scheduling: how a batch's rollouts are started, a slice of worker tasks at a time.

Split from `runner.py`, whose `run_batch` decides what each rollout does (play,
score, record); this module only decides when each starts, with at most a given
number in flight, and cancels them all together. Also the optional progress bar.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

LAUNCH_SLICE = 64


async def launch(run_one: Callable[[int], Any], indices: list[int], limit: int = 0) -> None:
    """Run `run_one` for every index, at most `limit` at a time (no limit when 0).

    Worker tasks take the next index whenever they finish one, which costs less
    than a task per rollout (and a semaphore round trip). They are started a slice
    at a time, and only while indices are left: when this coroutine resumes after
    yielding, every worker still alive is waiting on I/O, so another slice is what
    keeps more rollouts in flight. Rollouts that never wait are all done by the
    first slice; ones that wait get up to `limit` workers, as a task per rollout
    would. Starting a slice, not thousands of tasks, at a time keeps the loop free
    for the rollouts already running. If this is cancelled, every worker is
    cancelled (and each rollout's cleanup runs).
    """
    total = len(indices)
    limit = total if limit <= 0 else min(limit, total)
    taken = 0

    async def worker() -> None:
        nonlocal taken
        while taken < total:
            i = indices[taken]
            taken += 1
            await run_one(i)

    tasks: list[asyncio.Task[Any]] = []
    create_task = asyncio.get_running_loop().create_task  # a quarter cheaper than ensure_future
    try:
        while taken < total and len(tasks) < limit:
            tasks.extend(
                create_task(worker()) for _ in range(min(LAUNCH_SLICE, limit - len(tasks)))
            )
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="rollouts", unit="rollout")
