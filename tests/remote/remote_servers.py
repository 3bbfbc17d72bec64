"""What the env-server tests share: the token, and a server on a thread of its own."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

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
