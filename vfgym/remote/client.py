"""`RemoteSession`: one session on an env server, for asyncio code.

The async half of `RemoteEnv`, usable on its own where many sessions share one event
loop (a benchmark, an async trainer). Every wait is bounded: connecting by
`connect_timeout`, each answer by `timeout`; a server that is down, refuses the
connection, closes the session or falls silent becomes `RemoteEnvUnavailable` within
them, never a hang. An error frame becomes `RemoteEnvError` with OpenEnv's code.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from vfgym.errors import RemoteEnvError, RemoteEnvUnavailable
from vfgym.remote.protocol import CLOSE_TOO_BIG

logger = logging.getLogger("vfgym.remote")

#: The environment variable both `vfgym serve-env` and `RemoteEnv` read the token from.
TOKEN_VARIABLE = "VFGYM_ENV_TOKEN"


def http_base(url: str) -> str:
    """`url` (http(s):// or ws(s)://, with or without `/ws`) as the server's http base URL."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(
            f"the env server's URL must look like http://HOST:PORT (or ws://HOST:PORT/ws), "
            f"not {url!r}"
        )
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https"):
        raise ValueError(f"the env server's URL must be http, https, ws or wss, not {url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/ws"):
        path = path[: -len("/ws")]
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def token_headers(token: str | None) -> dict[str, str]:
    """The Authorization header for `token` (None: `VFGYM_ENV_TOKEN`, or no header)."""
    if token is None:
        token = os.environ.get(TOKEN_VARIABLE) or None
    return {"Authorization": f"Bearer {token}"} if token else {}


class RemoteSession:
    """A session on the env server at `url`: `await reset()`, `await step(action)`.

    Args:
        url: the server, e.g. http://HOST:PORT.
        token: its bearer token (default: the `VFGYM_ENV_TOKEN` variable).
        timeout: seconds to wait for each answer.
        connect_timeout: seconds to wait for the connection.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.base_url = http_base(url)
        self.headers = token_headers(token)
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self._http: aiohttp.ClientSession | None = None
        self._socket: aiohttp.ClientWebSocketResponse | None = None

    def info(self) -> dict[str, Any]:
        """The server's `/vfgym/info`: the text bound, chat or not, its limits and load.

        A plain blocking HTTP request, so that it needs no event loop: `RemoteEnv`
        reads it when it is made, in sync and asyncio code alike.
        """
        request = urllib.request.Request(self.base_url + "/vfgym/info", headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.connect_timeout) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise RemoteEnvUnavailable(
                    f"the env server at {self.base_url} refused the connection: no or wrong "
                    "bearer token; pass RemoteEnv(url, token=...) or set VFGYM_ENV_TOKEN to the "
                    "server's --token"
                ) from None
            raise RemoteEnvUnavailable(
                f"the env server at {self.base_url} answered /vfgym/info with HTTP {exc.code}; "
                "is it a `vfgym serve-env` server?"
            ) from None
        except (OSError, ValueError) as exc:
            raise RemoteEnvUnavailable(self._unreachable(exc)) from None

    async def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Start an episode; the observation frame's data."""
        return await self.request("reset", {"seed": seed, "options": options})

    async def step(self, action_data: dict[str, Any]) -> dict[str, Any]:
        """Send the model's turn (a step frame's data); the observation frame's data."""
        return await self.request("step", action_data)

    async def state(self) -> dict[str, Any]:
        """The episode so far."""
        return await self.request("state", None)

    async def request(self, kind: str, data: dict[str, Any] | None) -> dict[str, Any]:
        """Send one frame and return the data of the answer; raises as the class says."""
        socket = await self._connected()
        frame: dict[str, Any] = {"type": kind}
        if data is not None:
            frame["data"] = data
        try:
            try:
                async with asyncio.timeout(self.timeout):  # (no task per frame, as wait_for)
                    await socket.send_str(json.dumps(frame))
            except (ConnectionError, aiohttp.ClientError):
                pass  # a refused session sends its error frame then closes: read it below
            message = await socket.receive(timeout=self.timeout)
        except TimeoutError:
            await self._drop()
            raise RemoteEnvUnavailable(
                f"the env server at {self.base_url} did not answer a {kind} within "
                f"{self.timeout:g} s; the session was dropped (reset to start a new one), "
                "or raise the timeout"
            ) from None
        except (aiohttp.ClientError, ConnectionError, RuntimeError) as exc:
            await self._drop()
            raise RemoteEnvUnavailable(
                f"the connection to the env server at {self.base_url} broke during a {kind}: {exc}"
            ) from None
        if message.type is not aiohttp.WSMsgType.TEXT:
            code = message.data if message.type is aiohttp.WSMsgType.CLOSE else socket.close_code
            logger.debug("session closed: %s %r (close code %s)", message.type, message.data, code)
            await self._drop()
            raise RemoteEnvUnavailable(self._closed_why(kind, code))
        answer = json.loads(message.data)
        if answer.get("type") == "error":
            details = answer.get("data") or {}
            error_code = str(details.get("code", "SESSION_ERROR"))
            if error_code in ("CAPACITY_REACHED", "SESSION_ERROR"):
                await self._drop()  # the server closes these sessions
            raise RemoteEnvError(str(details.get("message", "unknown error")), error_code)
        return dict(answer.get("data") or {})

    async def close(self) -> None:
        """Say goodbye (a `close` frame) and close the connection; idempotent."""
        socket = self._socket
        if socket is not None and not socket.closed:
            try:
                await asyncio.wait_for(socket.send_str('{"type":"close"}'), 2.0)
            except Exception:
                pass  # the server may be gone already: closing is all that is left
        await self._drop()
        if self._http is not None:
            http, self._http = self._http, None
            await http.close()

    @property
    def connected(self) -> bool:
        """True while the WebSocket is open."""
        return self._socket is not None and not self._socket.closed

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(headers=self.headers)
        return self._http

    async def _connected(self) -> aiohttp.ClientWebSocketResponse:
        if self._socket is not None and not self._socket.closed:
            return self._socket
        http = self._client()
        ws_url = self.base_url.replace("http", "ws", 1) + "/ws"
        try:
            self._socket = await asyncio.wait_for(
                http.ws_connect(ws_url, max_msg_size=0), self.connect_timeout
            )
        except TimeoutError:
            raise RemoteEnvUnavailable(
                f"could not connect to the env server at {ws_url} within "
                f"{self.connect_timeout:g} s; is `vfgym serve-env` running there?"
            ) from None
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status == 401:
                raise RemoteEnvUnavailable(
                    f"the env server at {self.base_url} refused the connection: no or wrong "
                    "bearer token; pass RemoteEnv(url, token=...) or set VFGYM_ENV_TOKEN to the "
                    "server's --token"
                ) from None
            raise RemoteEnvUnavailable(
                f"the env server at {ws_url} refused the WebSocket (HTTP {exc.status}); is it a "
                "`vfgym serve-env` server?"
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise RemoteEnvUnavailable(self._unreachable(exc)) from None
        return self._socket

    async def _drop(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None and not socket.closed:
            try:
                await asyncio.wait_for(socket.close(), 2.0)
            except Exception:
                pass  # a socket that will not close politely is dropped all the same

    def _unreachable(self, exc: BaseException) -> str:
        return (
            f"cannot reach the env server at {self.base_url}: {exc or type(exc).__name__}; is "
            "`vfgym serve-env` running there, and is the URL right?"
        )

    def _closed_why(self, kind: str, code: int | None) -> str:
        reasons = {
            1000: "it closed the session",
            1001: "it is shutting down",
            1006: "the connection dropped (the server may have died)",
            1008: "the session was idle longer than the server's --idle-timeout",
            CLOSE_TOO_BIG: "a frame was larger than the server's --max-frame-bytes",
            1013: "it is at capacity",
        }
        why = reasons.get(code or 1006, f"close code {code}")
        return (
            f"the env server at {self.base_url} ended the session during a {kind}: {why}; "
            "reset to start a new session"
        )
