"""A bare aiohttp server on loopback, for tests whose server must answer in ways the
project's ModelServer never does (faults, responses without usage)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from openai import AsyncOpenAI, OpenAI

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


#: A scripted answer: (status, body (JSON, or text sent as it is), headers).
Answer = tuple[int, Any, dict[str, str]]


async def serve_posts(handler: Handler, *paths: str) -> tuple[web.AppRunner, int]:
    """Serve POSTs to `paths` with `handler` on a free loopback port; returns the
    runner (call `cleanup()` on it when done) and the port."""
    app = web.Application()
    for path in paths:
        app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, runner.addresses[0][1]


class ScriptedServer:
    """Answers each chat request with the next scripted answer; the last one repeats."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.times: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        self.port = 0
        self.delay = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        self.times.append(time.monotonic())
        await asyncio.sleep(self.delay)
        status, body, headers = self.answers[min(len(self.times), len(self.answers)) - 1]
        text = body if isinstance(body, str) else json.dumps(body)
        return web.Response(
            status=status, text=text, content_type="application/json", headers=headers
        )

    def client(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            base_url=f"http://127.0.0.1:{self.port}/v1", api_key="test", max_retries=0
        )

    def sync_client(self) -> OpenAI:
        return OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="test", max_retries=0)


def chat_body(text: str = "hi") -> dict[str, Any]:
    """A well-formed chat completion, as any OpenAI-compatible server sends it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
