"""Connections: one pooled session per event loop, keep-alive, a bound per host."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from aiohttp import web
from loopback_http import chat_body, serve_posts

from vfgym.inference.transport import CONNECTIONS_ENV, pooled_session, transport_for
from vfgym.inference.transport.session import close_sessions

HELLO = [{"role": "user", "content": "hello"}]


class PeerCounter:
    """Answers after `delay`, noting which client connection (port) each request came on."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.peers: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.peers.append(peer[1] if peer else -1)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return web.json_response(chat_body())


async def _serve(counter: PeerCounter) -> tuple[Any, openai.AsyncOpenAI]:
    runner, port = await serve_posts(counter.handle, "/v1/chat/completions")
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    return runner, client


async def test_sequential_calls_reuse_one_kept_alive_connection() -> None:
    counter = PeerCounter()
    runner, client = await _serve(counter)
    try:
        transport = transport_for(client)
        assert transport is not None
        for _ in range(5):
            await transport.chat_create(model="m", messages=HELLO)
        assert len(counter.peers) == 5
        assert len(set(counter.peers)) == 1
    finally:
        await runner.cleanup()


async def test_connections_per_host_bound_the_requests_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CONNECTIONS_ENV, "2")
    counter = PeerCounter(delay=0.1)
    runner, client = await _serve(counter)
    try:
        transport = transport_for(client)
        assert transport is not None
        answers = await asyncio.gather(
            *(transport.chat_create(model="m", messages=HELLO) for _ in range(6))
        )
        assert [a.choices[0].message.content for a in answers] == ["hi"] * 6
        assert counter.most_in_flight == 2
        assert len(set(counter.peers)) == 2
    finally:
        await runner.cleanup()


async def test_one_session_per_loop_and_per_bound() -> None:
    first = await pooled_session(8)
    assert await pooled_session(8) is first
    other = await pooled_session(9)
    assert other is not first
    await close_sessions()
    assert first.closed and other.closed
    assert await pooled_session(8) is not first  # a new one after closing


def test_a_loops_session_is_closed_when_the_loop_shuts_down() -> None:
    async def session_of_this_loop() -> Any:
        return await pooled_session(4)

    first = asyncio.run(session_of_this_loop())
    assert first.closed  # closed by asyncio.run's shutdown of async generators
    second = asyncio.run(session_of_this_loop())
    assert second is not first and second.closed
