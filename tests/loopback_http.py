"""A bare aiohttp server on loopback, for tests whose server must answer in ways the
project's ModelServer never does (faults, responses without usage)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
