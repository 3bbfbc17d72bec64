"""Shared fixtures: real model servers on loopback and a retry policy fast enough for tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai
import pytest

from vfgym.client import RetryPolicy
from vfgym.server import ModelServer

StartServer = Callable[..., Awaitable[ModelServer]]


class LoopbackServer(ModelServer):
    """The model server, with clients that skip loading TLS certificates.

    The server speaks plain HTTP on loopback, so certificates are never used,
    but loading them costs ~100 ms per client, which adds up over a test suite.
    The clients are the real `openai` clients with their real HTTP transport.
    """

    def client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        kwargs.setdefault("http_client", openai.DefaultAsyncHttpxClient(verify=False))
        return super().client(**kwargs)

    def sync_client(self, **kwargs: Any) -> openai.OpenAI:
        kwargs.setdefault("http_client", openai.DefaultHttpxClient(verify=False))
        return super().sync_client(**kwargs)


@pytest.fixture
async def model_server() -> AsyncIterator[StartServer]:
    """A factory: `server = await model_server(policy, **options)`, stopped after the test.

    The server runs on the test's own event loop, so a test can start several
    (one per policy) and inspect `server.requests` between steps.
    """
    servers: list[ModelServer] = []

    async def start(policy: Any, **options: Any) -> ModelServer:
        server = LoopbackServer(policy, **options)
        await server.start_async()
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            await server.stop_async()


@pytest.fixture
def fast_retry() -> RetryPolicy:
    """Retries with millisecond backoff: real retry behaviour without slow tests."""
    return RetryPolicy(max_retries=4, initial_delay=0.01, max_delay=0.05, jitter=0.0)
