"""Faults the test server can inject, so retry and error handling meet real HTTP failures.

A fault is consumed by one generation request (chat or text completion), in the
order it was queued; a standing fault (`fail_always`) applies to every request
once the queue is empty. The queue is shared between the thread that serves and
the thread that configures it, hence the lock.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

FAULT_KINDS: tuple[str, ...] = ("500", "429", "503", "slow", "drop", "malformed", "context")
DEFAULT_RETRY_AFTER = 0.1


@dataclass(frozen=True)
class Fault:
    """One injected failure.

    kind: one of `FAULT_KINDS`. seconds: how long a "slow" request waits before it
    is answered normally, or the Retry-After a "429" advertises.
    """

    kind: str
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; use one of {list(FAULT_KINDS)}")
        # NaN compares false with everything, so it is refused by name; infinity would
        # hang a "slow" request for ever and cannot be sent as a 429's Retry-After.
        if not math.isfinite(self.seconds) or self.seconds < 0:
            raise ValueError(
                f"a fault's seconds must be >= 0 and finite, got {self.seconds}; "
                'give the delay of a "slow" fault or the Retry-After of a "429" in seconds'
            )


def parse_fault(spec: Any) -> Fault:
    """Turn "500", 429, ("slow", 2.0), ("429", 1.0) or a `Fault` into a `Fault`."""
    if isinstance(spec, Fault):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = str(spec)
    if isinstance(spec, str):
        kind = spec.lower()
        if kind == "slow":
            raise ValueError('a "slow" fault needs a delay: ("slow", seconds)')
        return Fault(kind, DEFAULT_RETRY_AFTER if kind == "429" else 0.0)
    if isinstance(spec, tuple) and len(spec) == 2:
        kind, seconds = spec
        kind = str(kind).lower()
        if kind not in ("slow", "429"):
            raise ValueError(f"only 'slow' and '429' faults take a number of seconds, got {spec!r}")
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            raise ValueError(f"the seconds of fault {spec!r} must be a number") from None
        return Fault(kind, seconds)
    raise ValueError(
        f"cannot read fault {spec!r}; use one of {list(FAULT_KINDS)}, "
        '("slow", seconds) or ("429", retry_after_seconds)'
    )


class FaultQueue:
    """Thread-safe queue of one-shot faults plus an optional standing fault."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Fault] = deque()
        self._always: Fault | None = None

    def push(self, *specs: Any) -> None:
        """Queue faults, each consumed by one request, in order."""
        faults = [parse_fault(spec) for spec in specs]  # validate all before queueing any
        with self._lock:
            self._queue.extend(faults)

    def set_always(self, spec: Any | None) -> None:
        """Fail every request once the queue is empty (None switches it off)."""
        fault = None if spec is None else parse_fault(spec)
        with self._lock:
            self._always = fault

    def clear(self) -> None:
        """Drop queued faults and the standing fault."""
        with self._lock:
            self._queue.clear()
            self._always = None

    def take(self) -> Fault | None:
        """The fault for the next request, or None to answer it normally."""
        if not self._queue and self._always is None:  # lock-free fast path
            return None
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            return self._always

    @property
    def pending(self) -> int:
        """How many one-shot faults are still queued."""
        with self._lock:
            return len(self._queue)
