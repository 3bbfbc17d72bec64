"""Event-loop stall measurement: how late does a 10 ms ticker wake up?

A task that sleeps `interval` and notes how much later than asked it woke up
sees every stretch in which the loop ran something else without yielding; the
largest lateness is the longest time any rollout (or a timer, or a socket) had
to wait for its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class StallReport:
    """Lateness of the ticker's wake-ups, in seconds."""

    interval: float
    ticks: int = 0
    max_stall: float = 0.0
    max_stall_at: float = 0.0
    over_100ms: int = 0
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
            "max_stall_at_s": self.max_stall_at,
            "p99_stall_ms": self.percentile(99) * 1000,
            "stalls_over_100ms": self.over_100ms,
        }


async def _tick(report: StallReport, started: float) -> None:
    interval = report.interval
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(interval)
        woke = time.perf_counter()
        late = max(0.0, woke - asked - interval)
        report.ticks += 1
        report.samples.append(late)
        if late > 0.1:
            report.over_100ms += 1
        if late > report.max_stall:
            report.max_stall = late
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
