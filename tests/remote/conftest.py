"""Fixtures for the env-server tests: real servers on loopback, driven by real clients.

`serve(environment, **options)` runs an `EnvServer` on an event loop of its own in a
helper thread, so the synchronous clients under test (OpenEnv's `GenericEnvClient`,
`RemoteEnv`) drive it from the test's thread as they would from a trainer's process.
OpenEnv's client comes from the `openenv` extra: without it the tests that need it
skip and say how to install it, and with VFGYM_REQUIRE_OPENENV=1 (as CI sets) they
fail instead.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.remote.server import EnvServer

TOKEN = "test-token-7f3a"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class ThreadedServer:
    """An `EnvServer` on its own event loop in a daemon thread."""

    def __init__(self, server: EnvServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(server.start())
        self.stopped = False

    def call(self, coro: Any, timeout: float = 60.0) -> Any:
        """Run `coro` on the server's loop and wait for its result."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def stop(self, drain_timeout: float | None = None) -> None:
        if self.stopped:
            return
        self.stopped = True
        try:
            self.call(self.server.stop(drain_timeout))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., EnvServer]]:
    """`server = serve(environment, **options)`: a running EnvServer (token TOKEN unless
    the options say otherwise), stopped after the test."""
    running: list[ThreadedServer] = []

    def start(environment: MultiTurnEnv, **options: Any) -> EnvServer:
        options.setdefault("token", TOKEN)
        threaded = ThreadedServer(EnvServer(environment, **options))
        running.append(threaded)
        threaded.server.threaded = threaded  # type: ignore[attr-defined]
        return threaded.server

    try:
        yield start
    finally:
        for threaded in running:
            threaded.stop(drain_timeout=0.1)


@pytest.fixture
def openenv_client() -> Any:
    """OpenEnv's `GenericEnvClient` class (the `openenv` extra)."""
    try:
        from openenv.core.generic_client import GenericEnvClient
    except ImportError as exc:
        reason = (
            f"OpenEnv's client is not installed ({exc}); install it with "
            "`pip install -e '.[openenv]'`"
        )
        if os.environ.get("VFGYM_REQUIRE_OPENENV") == "1":
            pytest.fail(f"{reason} (VFGYM_REQUIRE_OPENENV=1 makes this a failure)", pytrace=False)
        pytest.skip(reason)
    return GenericEnvClient
