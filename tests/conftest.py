"""Shared fixtures: real model servers on loopback and a retry policy fast enough for tests."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from loopback_http import Answer, ScriptedServer, serve_posts

from vfgym.inference.client import RetryPolicy
from vfgym.inference.server import ModelServer

StartServer = Callable[..., Awaitable[ModelServer]]


def pytest_configure(config: pytest.Config) -> None:
    """Let Ctrl-C reach the processes the tests start.

    A shell that starts the suite in the background (`bash .ci/run &`) starts it with
    SIGINT ignored, and an ignored signal stays ignored in every process started from
    it: the tests that press Ctrl-C on a child would see it ignored. A handler of this
    process's own does not pass to a child, which starts with the default again.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
async def model_server() -> AsyncIterator[StartServer]:
    """A factory: `server = await model_server(policy, **options)`, stopped after the test.

    The server runs on the test's own event loop, so a test can start several
    (one per policy) and inspect `server.requests` between steps.
    """
    servers: list[ModelServer] = []

    async def start(policy: Any, **options: Any) -> ModelServer:
        server = ModelServer(policy, **options)
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


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[..., Awaitable[ScriptedServer]]]:
    """A factory: `server = await scripted(answer, ...)`, stopped after the test."""
    runners: list[web.AppRunner] = []

    async def start(*answers: Answer) -> ScriptedServer:
        server = ScriptedServer(list(answers))
        runner, server.port = await serve_posts(server.handle, "/v1/chat/completions")
        runners.append(runner)
        return server

    try:
        yield start
    finally:
        for runner in runners:
            await runner.cleanup()
