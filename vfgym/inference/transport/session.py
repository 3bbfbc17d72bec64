"""One pooled aiohttp session per event loop, closed when the loop shuts down.

Connections belong to the loop that opened them, and a rollout batch may run on a
loop of its own (`evaluate_sync`, `generate_sync`); so every loop gets its own
session, made the first time a request is sent from it. Its connector keeps
connections alive between requests, opens at most a bounded number to one host
(`VFGYM_HTTP_CONNECTIONS_PER_HOST`; requests past the bound wait for a free one),
and sets no bound on the hosts. The session is closed when the loop shuts its
async generators down (`asyncio.run`, `asyncio.Runner` and pytest's loops do), by
a finaliser parked as an async generator of that loop; `close_sessions` closes
the running loop's sessions at once.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator

import aiohttp


class _LoopSessions:
    """The sessions of one event loop, by connection bound, and their finaliser."""

    __slots__ = ("by_limit", "finaliser")

    def __init__(self) -> None:
        self.by_limit: dict[int, aiohttp.ClientSession] = {}
        # Held here: the loop keeps only a weak reference to its async generators.
        self.finaliser: AsyncIterator[None] | None = None

    async def close(self) -> None:
        sessions = list(self.by_limit.values())
        self.by_limit.clear()
        for session in sessions:
            await session.close()


# A cache keyed weakly by the loop: an entry goes with its loop, nothing is set up at import.
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSessions] = (
    weakref.WeakKeyDictionary()
)


async def _close_at_shutdown(sessions: _LoopSessions) -> AsyncIterator[None]:
    """Parked at its `yield` until the loop's `shutdown_asyncgens` closes it."""
    try:
        yield
    finally:
        await sessions.close()


async def pooled_session(limit_per_host: int) -> aiohttp.ClientSession:
    """The running loop's session with at most `limit_per_host` connections per host."""
    loop = asyncio.get_running_loop()
    sessions = _by_loop.get(loop)
    if sessions is None:
        sessions = _by_loop[loop] = _LoopSessions()
        finaliser = _close_at_shutdown(sessions)
        await finaliser.__anext__()
        sessions.finaliser = finaliser
    session = sessions.by_limit.get(limit_per_host)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(
            limit=0,  # no bound over all hosts: the per-host bound is the one that matters
            limit_per_host=limit_per_host,
            keepalive_timeout=60.0,
            ttl_dns_cache=300,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            # Headers are the client's, set per request; aiohttp adds no User-Agent.
            skip_auto_headers=("User-Agent",),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        sessions.by_limit[limit_per_host] = session
    return session


async def close_sessions() -> None:
    """Close the running loop's pooled sessions now (the next request opens a new one)."""
    sessions = _by_loop.get(asyncio.get_running_loop())
    if sessions is not None:
        await sessions.close()
