"""Faults the model server can inject, so retry and error handling meet real HTTP failures.

Three sources, asked in this order for each generation request (chat or text
completion): queued one-shot faults, in the order they were queued; a standing
fault (`fail_always`) that hits every request; and a `FaultMix`, which hits a
random share of requests with kinds drawn at random, reproducibly from a seed.
The mix is what a user rehearsing their own pipeline wants (a server that is
flaky at a known rate), the queue is what a test that needs one exact failure
wants. The state is shared between the thread that serves and the thread that
configures it, hence the locks.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter, deque
from collections.abc import Iterable
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


#: Delay of a "slow" fault in a mix when the spec gives none.
DEFAULT_SLOW_SECONDS = 1.0


class FaultMix:
    """A random share of requests fail, each with a kind drawn from `faults`.

    faults: the kinds to draw from, each as `parse_fault` reads it ("500", "429",
        ("slow", 2.0), ...; a bare "slow" waits `DEFAULT_SLOW_SECONDS`), drawn with
        equal chance; name a kind twice to draw it twice as often.
    rate: the share of requests that get a fault, from 0 to 1.
    seed: the random seed. The same seed and the same order of requests give the
        same faults, so a failure found in a rehearsal can be replayed.

    `injected` counts the faults injected so far, by kind.
    """

    def __init__(self, faults: Iterable[Any], rate: float, seed: int | None = 0) -> None:
        kinds = [_mix_fault(spec) for spec in faults]
        if not kinds:
            raise ValueError(
                f"a fault mix needs at least one fault kind; use some of {list(FAULT_KINDS)}"
            )
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise ValueError(
                f"a fault mix's rate is the share of requests that fail, from 0 to 1; got {rate!r}"
            )
        self.faults = tuple(kinds)
        self.rate = float(rate)
        self.seed = seed
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._injected: Counter[str] = Counter()

    def __repr__(self) -> str:
        kinds = ", ".join(_describe(fault) for fault in self.faults)
        return f"FaultMix([{kinds}], rate={self.rate}, seed={self.seed})"

    def draw(self) -> Fault | None:
        """The fault for the next request, or None to answer it normally."""
        with self._lock:
            if self._random.random() >= self.rate:
                return None
            fault = self._random.choice(self.faults)
            self._injected[fault.kind] += 1
            return fault

    @property
    def injected(self) -> dict[str, int]:
        """How many faults were injected so far, by kind."""
        with self._lock:
            return dict(self._injected)


def _mix_fault(spec: Any) -> Fault:
    """A mix's fault: as `parse_fault` reads it, with a bare "slow" taking a default delay."""
    if isinstance(spec, str) and spec.lower() == "slow":
        return Fault("slow", DEFAULT_SLOW_SECONDS)
    return parse_fault(spec)


def _describe(fault: Fault) -> str:
    return f"{fault.kind}={fault.seconds:g}" if fault.kind in ("slow", "429") else fault.kind


def parse_fault_mix(text: str, rate: float, seed: int | None = 0) -> FaultMix:
    """A `FaultMix` from a command line's text: kinds separated by commas, "slow" and
    "429" optionally with seconds after "=" ("500,429=2,drop,slow=0.5")."""
    specs: list[Any] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        kind, has_seconds, seconds = item.partition("=")
        if not has_seconds:
            specs.append(kind)
            continue
        try:
            specs.append((kind, float(seconds)))
        except ValueError:
            raise ValueError(
                f"cannot read fault {item!r}: the seconds after '=' must be a number, "
                'e.g. "slow=0.5" or "429=2"'
            ) from None
    return FaultMix(specs, rate, seed)


class FaultQueue:
    """Thread-safe queue of one-shot faults plus an optional standing fault."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Fault] = deque()
        self._always: Fault | None = None
        self._mix: FaultMix | None = None

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

    def set_mix(self, mix: FaultMix | None) -> None:
        """Fail a random share of the requests that no queued or standing fault hits."""
        if mix is not None and not isinstance(mix, FaultMix):
            raise TypeError(f"expected a FaultMix (or None), got {type(mix).__name__}")
        with self._lock:
            self._mix = mix

    @property
    def mix(self) -> FaultMix | None:
        """The fault mix in force, if any."""
        return self._mix

    def clear(self) -> None:
        """Drop queued faults, the standing fault and the fault mix."""
        with self._lock:
            self._queue.clear()
            self._always = None
            self._mix = None

    def take(self) -> Fault | None:
        """The fault for the next request, or None to answer it normally."""
        if not self._queue and self._always is None and self._mix is None:  # lock-free
            return None
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            if self._always is not None:
                return self._always
            mix = self._mix
        return None if mix is None else mix.draw()

    @property
    def pending(self) -> int:
        """How many one-shot faults are still queued."""
        with self._lock:
            return len(self._queue)
