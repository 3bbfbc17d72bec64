"""The retry policy of model calls: how long to wait, and what a failure that persists says.

Split from `client.py`, which sends the requests and decides which failures are
transient (`is_transient`); this module holds `RetryPolicy` (backoff with jitter,
capped), the server's own Retry-After, and the pooled connections of a closed
event loop, which are sent again at once without counting as a retry.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """How transient server failures are retried: exponential backoff with jitter.

    Retried: HTTP 408, 409, 429 and 5xx, timeouts, dropped connections, bodies
    that are not valid JSON and 200 answers without a completion (an OpenAI or a
    vLLM error object, or no choices). A pooled connection of an event loop that
    has closed is dropped and the request sent again at once, without counting as
    a retry (see `stale_loop`). Anything else
    (a 400, a 401, a 404) is the caller's to fix and fails at once. A server's
    `x-should-retry` header overrides the status either way. A server's
    Retry-After (seconds or an HTTP date) replaces the backoff; every wait,
    jitter included, is capped at `max_delay`. `generate`/`evaluate` turn the
    openai client's own retries off for the batch, so this policy alone decides.
    """

    max_retries: int = 4
    initial_delay: float = 0.25
    max_delay: float = 8.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        # A negative or NaN wait would not fail: it would retry at once, hammering
        # a server that is already struggling. Refuse it where it is written.
        if not self.max_retries >= 0:
            raise ValueError(f"RetryPolicy max_retries must be >= 0, got {self.max_retries}")
        for name in ("initial_delay", "max_delay"):
            if not getattr(self, name) >= 0:
                raise ValueError(
                    f"RetryPolicy {name} must be >= 0 seconds, got {getattr(self, name)}"
                )
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"RetryPolicy jitter must be a fraction in [0, 1], got {self.jitter}")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        if retry_after is not None:
            return min(self.max_delay, retry_after)
        base = min(self.max_delay, self.initial_delay * (2 ** (attempt - 1)))
        # Capped again after the jitter: `max_delay` is the promise, not the median.
        return min(self.max_delay, base * (1.0 + random.uniform(-self.jitter, self.jitter)))


DEFAULT_RETRY = RetryPolicy()


#: Connections of a closed event loop a request may meet before the retry policy
#: counts them: openai's default pool keeps up to 100 idle ones (1,000 at most open).
MAX_STALE_CONNECTIONS = 1000


def stale_loop(exc: BaseException) -> bool:
    """True when a pooled connection belongs to an event loop that has closed.

    An `AsyncOpenAI` used under one `asyncio.run` and again under the next keeps the
    first loop's connections in its pool; each fails once, is dropped from the pool,
    and the request sent again goes over a connection of the running loop. (The
    running loop itself cannot be the closed one: this code runs on it.)
    """
    return isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"


def failure_hint(exc: BaseException) -> str:
    """What to do about a call that failed on every attempt, as far as `exc` tells."""
    if stale_loop(exc):
        return (
            "; the client's connections belong to an event loop that has closed: make the "
            "AsyncOpenAI client inside the coroutine that asyncio.run runs, or call "
            "evaluate_sync / generate_sync, which give each run connections of its own"
        )
    return "; check that it is up and not overloaded"


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait, if it said (`retry-after-ms` is the precise one)."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value is None:
            continue
        seconds: float | None
        try:
            seconds = float(value) * scale
        except ValueError:
            if scale != 1.0:
                continue
            seconds = _seconds_until(value)  # Retry-After may be an HTTP date
        if seconds is not None and seconds >= 0:
            return seconds
    return None


def _seconds_until(http_date: str) -> float | None:
    """Seconds from now to an HTTP date (0 when it has passed); None when it is not one."""
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
