"""The run's circuit breaker: stop giving work to a model server that is gone.

Without it, every rollout left in a run meets the dead server on its own and
retries it through the whole retry policy (a big run would take hours to give
up). After `threshold` rollouts in a row end with a connection failure (no
server answered at all: refused, reset, timed out), the breaker trips: the
rollouts not yet started are recorded as errored with `ServerUnreachable` at
once, without a request, and the results directory is left to be resumed (an
errored rollout is played again by `--resume`) once the server is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from vfgym.errors import ServerUnreachable

logger = logging.getLogger(__name__)

#: Consecutive connection failures after which a run stops sending work.
DEFAULT_BREAKER_THRESHOLD = 8

#: The openai client's errors for a request no server answered.
_CONNECTION_FAILURES = frozenset({"APIConnectionError", "APITimeoutError", "ServerUnreachable"})


def connection_failure(state: Any) -> bool:
    """Whether the rollout ended because no server answered its request."""
    error = state.get("error") if isinstance(state, dict) else None
    if not isinstance(error, dict):
        return False
    cause = error.get("cause")
    names = {error.get("type"), cause.get("type") if isinstance(cause, dict) else None}
    return bool(names & _CONNECTION_FAILURES)


class CircuitBreaker:
    """Counts consecutive connection failures across a run's rollouts."""

    def __init__(self, threshold: int = DEFAULT_BREAKER_THRESHOLD, base_url: str = "") -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValueError(
                f"the circuit breaker's threshold must be a whole number >= 1, got {threshold!r}"
            )
        self.threshold = threshold
        self.base_url = base_url
        self.failures = 0
        self.tripped = False
        self._trip = asyncio.Event()

    def record(self, state: Any) -> None:
        """Count the ended rollout's `state`: a connection failure adds one, any rollout
        the server answered resets the count (one that failed otherwise leaves it)."""
        if connection_failure(state):
            self.failures += 1
            if self.failures >= self.threshold and not self.tripped:
                self.tripped = True
                self._trip.set()
                logger.error("%s", self.refusal())
        elif not (isinstance(state, dict) and state.get("error")):
            self.failures = 0

    async def tripped_within(self, seconds: float) -> bool:
        """Wait `seconds` (a retry's backoff), or less if the breaker trips meanwhile:
        True when it has tripped, so a rollout retrying a dead server gives up at once
        instead of sleeping through the rest of its retries."""
        if not self.tripped:
            try:
                await asyncio.wait_for(self._trip.wait(), seconds)
            except TimeoutError:
                pass
        return self.tripped

    def refusal(self) -> ServerUnreachable:
        """The error a rollout gets that is not started once the breaker tripped."""
        return ServerUnreachable(
            f"not started: {self.failures} rollouts in a row could not connect to the model "
            f"server{' at ' + self.base_url if self.base_url else ''}, so the run stopped "
            "sending it work; start the server (or fix --base-url) and resume the run "
            "(vfgym eval ... --resume) to play the rollouts left",
            attempts=0,
        )


#: The breaker of the run the current task belongs to (rollout tasks inherit it), so a
#: model call's retries can see it trip; None outside a run.
_RUN_BREAKER: ContextVar[CircuitBreaker | None] = ContextVar("vfgym_run_breaker", default=None)


def run_breaker() -> CircuitBreaker | None:
    """The circuit breaker of the run the calling task belongs to, if any."""
    return _RUN_BREAKER.get()


@contextmanager
def breaker_of_run(breaker: CircuitBreaker) -> Iterator[None]:
    """Make `breaker` the run's for the tasks started inside (see `run_breaker`)."""
    token = _RUN_BREAKER.set(breaker)
    try:
        yield
    finally:
        _RUN_BREAKER.reset(token)


__all__ = [
    "DEFAULT_BREAKER_THRESHOLD",
    "CircuitBreaker",
    "breaker_of_run",
    "connection_failure",
    "run_breaker",
]
