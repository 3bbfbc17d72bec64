"""Fixtures for the env-server tests: real servers on loopback, driven by real clients.

`serve(environment, **options)` runs an `EnvServer` on an event loop of its own in a
helper thread, so the synchronous clients under test (OpenEnv's `GenericEnvClient`,
`RemoteEnv`) drive it from the test's thread as they would from a trainer's process.
OpenEnv's client comes from the `openenv` extra: without it the tests that need it
skip and say how to install it, and with VFGYM_REQUIRE_OPENENV=1 (as CI sets) they
fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from remote_servers import TOKEN, ThreadedServer

from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.remote.server import EnvServer


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
