"""Event-loop stall measurement: how late does a 10 ms ticker wake up?

A task that sleeps `interval` and notes how much later than asked it woke up
sees every stretch in which the loop ran something else without yielding; the
largest lateness is the longest time any rollout (or a timer, or a socket) had
to wait for its turn.

On a shared machine a stall can also be the operating system running another
process, so each gap's CPU time on the loop thread is kept as well: a stall
whose CPU time is small was the machine's, not the code's. Garbage-collector
pauses are timed apart, since a full collection stops the loop like any
synchronous code does but is a property of the live heap, not of one call.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

STALL_LIMIT = 0.1


@dataclass
class StallReport:
    """Lateness of the ticker's wake-ups and the loop thread's CPU in each gap, in seconds."""

    interval: float
    ticks: int = 0
    max_stall: float = 0.0
    max_stall_cpu: float = 0.0
    max_stall_at: float = 0.0
    max_cpu_stall: float = 0.0
    over_limit: int = 0
    samples: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of the lateness samples."""
        if not self.samples:
            return 0.0
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]

    def as_dict(self) -> dict[str, float | int]:
        return {
            "interval_ms": self.interval * 1000,
            "ticks": self.ticks,
            "max_stall_ms": self.max_stall * 1000,
            "max_stall_cpu_ms": self.max_stall_cpu * 1000,
            "max_stall_at_s": self.max_stall_at,
            "max_cpu_stall_ms": self.max_cpu_stall * 1000,
            "p99_stall_ms": self.percentile(99) * 1000,
            "stalls_over_100ms": self.over_limit,
        }


async def _tick(report: StallReport, started: float) -> None:
    interval = report.interval
    while True:
        asked, asked_cpu = time.perf_counter(), time.thread_time()
        await asyncio.sleep(interval)
        woke, woke_cpu = time.perf_counter(), time.thread_time()
        late = max(0.0, woke - asked - interval)
        # CPU the loop thread spent in this gap beyond what an idle wait costs.
        busy = woke_cpu - asked_cpu
        report.ticks += 1
        report.samples.append(late)
        report.over_limit += late > STALL_LIMIT
        report.max_cpu_stall = max(report.max_cpu_stall, busy)
        if late > report.max_stall:
            report.max_stall, report.max_stall_cpu = late, busy
            report.max_stall_at = woke - started


@contextlib.asynccontextmanager
async def watch_stalls(interval: float = 0.01) -> AsyncIterator[StallReport]:
    """Measure the loop's stalls for the duration of the `async with` block."""
    report = StallReport(interval=interval)
    task = asyncio.create_task(_tick(report, time.perf_counter()))
    await asyncio.sleep(0)  # let the ticker take its first timestamp before the work starts
    try:
        yield report
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass
class GcReport:
    """Pauses of the cyclic garbage collector, per generation, in seconds."""

    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    max_pause: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    total_pause: float = 0.0
    tracked_at_end: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "gc_collections": list(self.collections),
            "gc_max_pause_ms": [round(p * 1000, 1) for p in self.max_pause],
            "gc_total_pause_s": self.total_pause,
            "gc_tracked_objects": self.tracked_at_end,
        }


@contextlib.contextmanager
def watch_gc() -> Iterator[GcReport]:
    """Time every collection while the block runs (a benchmark process only: gc is global)."""
    report = GcReport()
    began: list[float] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began.append(time.perf_counter())
        elif began:
            pause = time.perf_counter() - began.pop()
            gen = int(info.get("generation", 0))
            report.collections[gen] += 1
            report.max_pause[gen] = max(report.max_pause[gen], pause)
            report.total_pause += pause

    gc.callbacks.append(callback)
    try:
        yield report
    finally:
        gc.callbacks.remove(callback)
        report.tracked_at_end = len(gc.get_objects())
