"""`ModelServer`: a real OpenAI-compatible HTTP server on loopback, driven by a policy.

Tests, benchmarks and `vfgym eval`'s built-in default model talk to it through
the real `openai` client, so retries, timeouts, tool-call parsing and token-id
handling are exercised over HTTP exactly as against vLLM. It runs either on the
caller's event loop (`async with`) or on a loop of its own in a background thread
(`with`, `start()`/`stop()`), for sync code such as Gymnasium environments and
the CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import openai
from aiohttp import web

from vfgym.inference.server.app import ServerCore, build_app
from vfgym.inference.server.background import serve_in_thread, stop_thread
from vfgym.inference.server.faults import FaultMix
from vfgym.inference.server.policy import PolicyRouter, PolicySpec
from vfgym.inference.server.protocol import TokenizerView
from vfgym.inference.server.tokenizer import ByteTokenizer

API_KEY = "vfgym"
_BACKLOG = 4096


class ModelServer:
    """An OpenAI-compatible server whose "model" is `policy`.

    policy: `policy(messages)` or `policy(messages, request)`, sync or async,
        returning the assistant's text or an assistant message dict (see
        `vfgym.inference.server.policy`); or a dict mapping model names to such callables.
    host, port: where to listen; port 0 picks a free port.
    tokenizer: counts tokens and produces token ids; `ByteTokenizer()` by default.
        Any Hugging-Face-like tokenizer with `encode`, `decode` and
        `apply_chat_template` works.
    max_model_len: the context window; longer requests get vLLM's 400.
    model_name: the name listed by /v1/models when `policy` is a single callable
        (which then answers for any model name).
    offload_sync: run sync policies in a worker thread instead of on the server's
        loop. Off by default because test policies are cheap pure functions and a
        thread hop per request would dominate the cost; turn it on for a policy
        that blocks.
    record_requests: keep every generation request body in `requests`.
    faults: a `FaultMix` to start with (see `set_fault_mix`).
    """

    def __init__(
        self,
        policy: PolicySpec,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tokenizer: Any | None = None,
        max_model_len: int = 32768,
        model_name: str = "vfgym-test",
        offload_sync: bool = False,
        record_requests: bool = True,
        faults: FaultMix | None = None,
    ) -> None:
        # (a bool is an int to Python: True would be a 1-token window, or port 1)
        if type(max_model_len) is bool or not isinstance(max_model_len, int) or max_model_len < 1:
            raise ValueError(f"max_model_len must be a positive integer, got {max_model_len!r}")
        if type(port) is bool or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
        self.host = host
        self._requested_port = port
        self.tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
        self.model_name = model_name
        self.max_model_len = max_model_len
        self._core = ServerCore(
            PolicyRouter(policy, default_model=model_name, offload_sync=offload_sync),
            TokenizerView(self.tokenizer),
            model_name=model_name,
            max_model_len=max_model_len,
            record_requests=record_requests,
        )
        if faults is not None:
            self._core.faults.set_mix(faults)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._owner_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        where = self.base_url if self._port is not None else "not started"
        return f"ModelServer({where}, models={self.models})"

    # -- addresses and clients --------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        if self._port is None:
            raise RuntimeError("the server is not running; start it with `async with` or `with`")
        return self._port

    @property
    def url(self) -> str:
        """The server root, e.g. for /tokenize: "http://127.0.0.1:PORT"."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL: "http://127.0.0.1:PORT/v1"."""
        return f"{self.url}/v1"

    @property
    def models(self) -> list[str]:
        """The model names this server lists."""
        return list(self._core.router.models)

    @property
    def is_running(self) -> bool:
        """True while the server is listening."""
        return self._runner is not None

    def client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` for this server, with retries off unless given.

        The server speaks plain HTTP on loopback, so the client skips loading TLS
        certificates (about 100 ms per client otherwise); it is the real client
        with its real transport.
        """
        if "http_client" not in kwargs:
            kwargs["http_client"] = openai.DefaultAsyncHttpxClient(verify=False)
        return openai.AsyncOpenAI(**self._client_options(kwargs))

    def sync_client(self, **kwargs: Any) -> openai.OpenAI:
        """An `openai.OpenAI` for this server, with retries off unless given (see `client`)."""
        if "http_client" not in kwargs:
            kwargs["http_client"] = openai.DefaultHttpxClient(verify=False)
        return openai.OpenAI(**self._client_options(kwargs))

    def _client_options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The client's options: this server's address and key unless the caller gave
        its own (the server checks no key, so any `api_key` works)."""
        return {"base_url": self.base_url, "api_key": API_KEY, "max_retries": 0, **kwargs}

    # -- records and faults -----------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the generation requests received so far (a snapshot, oldest first)."""
        return self._core.records()

    def clear_requests(self) -> None:
        """Forget the recorded request bodies."""
        self._core.clear_records()

    def inject_faults(self, *faults: Any) -> None:
        """Queue faults, each consumed by one generation request, in order.

        A fault is "500", "503", "429" (with Retry-After; `("429", seconds)` sets
        it), `("slow", seconds)` (answer normally after a delay), "drop" (close
        the connection without an answer), "malformed" (200 with a body that is
        not JSON) or "context" (the context-length 400).
        """
        self._core.faults.push(*faults)

    def fail_always(self, fault: Any) -> None:
        """Answer every generation request with `fault` (after any queued ones)."""
        self._core.faults.set_always(fault)

    def set_fault_mix(self, mix: FaultMix | None) -> None:
        """Fail a random share of generation requests, as `mix` says (None: stop).

        For rehearsing a pipeline against a flaky server: `FaultMix(["429", "500",
        "drop"], rate=0.1, seed=7)` fails one request in ten, reproducibly. Queued and
        standing faults still come first.
        """
        self._core.faults.set_mix(mix)

    @property
    def fault_mix(self) -> FaultMix | None:
        """The fault mix in force, if any (its `injected` counts what it did)."""
        return self._core.faults.mix

    def clear_faults(self) -> None:
        """Drop queued and standing faults, and the fault mix."""
        self._core.faults.clear()

    @property
    def pending_faults(self) -> int:
        """Queued one-shot faults not yet consumed."""
        return self._core.faults.pending

    # -- running on the caller's loop ---------------------------------------------

    async def start_async(self) -> ModelServer:
        """Start serving on the running event loop."""
        if self._runner is not None:
            raise RuntimeError("this server is already running")
        runner = web.AppRunner(
            build_app(self._core),
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=0.5,
        )
        await runner.setup()
        try:
            sock = self._bind()
        except BaseException:
            await runner.cleanup()
            raise
        try:
            site = web.SockSite(runner, sock, backlog=_BACKLOG)
            await site.start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = sock.getsockname()[1]
        self._owner_loop = asyncio.get_running_loop()
        return self

    def _bind(self) -> socket.socket:
        """A socket bound to host and port, refusing a port that something listens on.

        SO_REUSEADDR (as asyncio's own servers set it on POSIX) lets a stopped
        server's port be bound again at once: stopping closes the clients' open
        connections, which leaves the port in TIME_WAIT for a minute otherwise.
        """
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        try:
            if os.name == "posix":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            raise OSError(
                errno.EADDRINUSE,
                f"cannot serve on {self.host}:{self._requested_port}: the port is already in "
                "use; stop what listens there, pick another port, or pass port=0 for a free one",
            ) from exc
        except BaseException:
            sock.close()
            raise
        return sock

    async def stop_async(self) -> None:
        """Stop serving and close every connection (idempotent)."""
        runner, self._runner = self._runner, None
        self._port = None
        self._owner_loop = None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> ModelServer:
        return await self.start_async()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_async()

    # -- running on a background thread -------------------------------------------

    def start(self) -> ModelServer:
        """Serve from a background thread with its own event loop; returns once listening."""
        if self._thread is not None or self._runner is not None:
            raise RuntimeError("this server is already running")
        self._thread, self._thread_loop = serve_in_thread(
            self.start_async, self.stop_async, "vfgym-model-server"
        )
        return self

    def stop(self) -> None:
        """Stop a server started with `start()` and wait for its thread (idempotent)."""
        thread, loop = self._thread, self._thread_loop
        if thread is None or loop is None:
            return
        self._thread = self._thread_loop = None
        stop_thread(thread, loop)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def running(self) -> Iterator[ModelServer]:
        """`with ModelServer(policy).running() as server:` — serve from a background thread."""
        self.start()
        try:
            yield self
        finally:
            self.stop()
