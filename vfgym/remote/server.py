"""`EnvServer`: a vfgym environment served over OpenEnv's WebSocket protocol.

    server = EnvServer(load_environment("wordle"), token="s3cret", max_sessions=8)
    async with server:
        print(server.base_url)   # http://127.0.0.1:PORT; sessions at ws://.../ws

Routes (the wire format is in `vfgym.remote.protocol`):

- `GET /ws`: a session per connection (OpenEnv's protocol);
- `GET /health`: `{"status": "healthy"}`, open without a token so that a load
  balancer or a container runtime can probe it;
- `GET /schema`, `GET /metadata`: OpenEnv's, for the action, observation and state
  schemas and what the environment is;
- `GET /vfgym/info`: vfgym's own: the text bound, whether actions may be messages, and
  the server's limits and load, which `RemoteEnv` builds its spaces from;
- `POST /vfgym/rollout`: vfgym's own: a whole rollout against a model endpoint
  (see `vfgym.remote.rollout`).

Operations: every route but `/health` needs `Authorization: Bearer TOKEN` unless the
server was made with `allow_no_token=True`, which it refuses off loopback. At most
`max_sessions` sessions run; one more gets a `CAPACITY_REACHED` error frame and the
connection closes at once (close code 1013, "try again later"). A session silent for
`idle_timeout` seconds is ended and its episode cleaned up (its sandbox returned). A
frame over `max_frame_bytes` ends its session with close code 1009, a client that
stops reading is dropped after `send_timeout`, and neither touches another session.
`stop()` drains: no new sessions, running ones get `drain_timeout` to finish, the rest
are closed with code 1001 and every episode's cleanup runs before the environment's
resources (a SandboxEnv's containers) are released.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web

from vfgym.envs.env_group import EnvGroup
from vfgym.envs.multiturn_env import MultiTurnEnv
from vfgym.gym.spaces import DEFAULT_MAX_TEXT_LENGTH
from vfgym.remote.protocol import (
    ACTION_SCHEMA,
    CAPACITY_REACHED,
    CLOSE_GOING_AWAY,
    CLOSE_POLICY,
    CLOSE_TOO_BIG,
    CLOSE_TRY_AGAIN,
    EXECUTION_ERROR,
    OBSERVATION_SCHEMA,
    SESSION_ERROR,
    STATE_SCHEMA,
    FrameError,
    encode,
    error_frame,
    parse_client_frame,
)
from vfgym.remote.session import Session
from vfgym.sandbox.env import SandboxEnv

logger = logging.getLogger("vfgym.remote")

#: The largest client frame taken, in bytes, unless the server is told otherwise.
DEFAULT_MAX_FRAME_BYTES = 1 << 20

#: Why a token is needed, said by every refusal.
_TOKEN_HINT = (
    "send 'Authorization: Bearer TOKEN' with the token the server was started with "
    "(vfgym serve-env --token, or VFGYM_ENV_TOKEN; RemoteEnv(url, token=...) reads the same "
    "variable)"
)


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EnvServer:
    """Serves `environment` to remote clients, one `GymEnv` episode per WebSocket.

    Args:
        environment: the vfgym environment (a `MultiTurnEnv`); shared by the sessions,
            each of which plays its own episodes.
        host: the address to listen on.
        port: the port to listen on; 0 picks a free one.
        token: the bearer token every request but `/health` must carry.
        allow_no_token: serve without a token; only on a loopback host.
        max_sessions: sessions at once (and whole rollouts at once); one more is refused.
        idle_timeout: seconds a session may stay silent before it is ended.
        max_frame_bytes: the largest client frame.
        send_timeout: seconds a frame may take to reach a client before it is dropped.
        drain_timeout: seconds `stop()` gives running sessions to finish.
        env_id: the name `/metadata` reports.
        max_text_length: the bound of the observation text (as `GymEnv`'s).
    """

    def __init__(
        self,
        environment: MultiTurnEnv,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        allow_no_token: bool = False,
        max_sessions: int = 8,
        idle_timeout: float = 300.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        send_timeout: float = 30.0,
        drain_timeout: float = 30.0,
        env_id: str | None = None,
        max_text_length: int = DEFAULT_MAX_TEXT_LENGTH,
    ) -> None:
        if not isinstance(environment, MultiTurnEnv):
            raise TypeError(
                f"EnvServer serves a vfgym MultiTurnEnv, not {type(environment).__name__}: "
                "a session steps through its turn loop"
            )
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ValueError("token must be a non-empty string, or None with allow_no_token")
        if token is None and not allow_no_token:
            raise ValueError(
                "a bearer token is required: pass token=... (vfgym serve-env --token or "
                "VFGYM_ENV_TOKEN), or allow_no_token=True (--no-token) on a loopback host"
            )
        if token is None and not is_loopback(host):
            raise ValueError(
                f"serving without a token is allowed on loopback only, and {host!r} is not a "
                "loopback address: give a token, or serve on 127.0.0.1"
            )
        for name, value in (("max_sessions", max_sessions), ("max_frame_bytes", max_frame_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, number in (
            ("idle_timeout", idle_timeout),
            ("send_timeout", send_timeout),
            ("drain_timeout", drain_timeout),
        ):
            if not isinstance(number, int | float) or isinstance(number, bool) or number <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {number!r}")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"port must be a number from 0 to 65535, got {port!r}")
        self.environment = environment
        self.host = host
        self.port = port
        self.token = token
        self.max_sessions = max_sessions
        self.idle_timeout = float(idle_timeout)
        self.max_frame_bytes = max_frame_bytes
        self.send_timeout = float(send_timeout)
        self.drain_timeout = float(drain_timeout)
        self.env_id = env_id or environment.env_id or type(environment).__name__
        self.max_text_length = max_text_length
        #: The sessions running now, by number.
        self.sessions: dict[int, Session] = {}
        #: How many sessions ended, by why (client, idle, too_big, slow, error, drained).
        self.ended: dict[str, int] = {}
        self._sockets: dict[int, web.WebSocketResponse] = {}
        self._busy: set[int] = set()
        self._reasons: dict[int, str] = {}
        self._opened = 0  # sessions opened so far: the next one's number
        self._rollouts = 0
        self._draining = False
        self._stopped = False
        self._runner: web.AppRunner | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._started_at = time.monotonic()
        self._rollout_route: Callable[[web.Request], Awaitable[web.StreamResponse]] | None = None
        _share_sandboxes(environment, max_sessions)

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """`http://HOST:PORT` of the running server (the port it really got)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def ws_url(self) -> str:
        """The sessions' address, `ws://HOST:PORT/ws`."""
        return self.base_url.replace("http://", "ws://", 1) + "/ws"

    async def start(self) -> None:
        """Listen; afterwards `port` is the port bound."""
        from vfgym.remote.rollout import rollout_route

        self._rollout_route = rollout_route(self)
        app = web.Application(middlewares=[self._authorize], client_max_size=self.max_frame_bytes)
        app.router.add_get("/health", self._health)
        app.router.add_get("/schema", self._schema)
        app.router.add_get("/metadata", self._metadata)
        app.router.add_get("/vfgym/info", self._info)
        app.router.add_get("/ws", self._websocket)
        app.router.add_post("/vfgym/rollout", self._rollout_route)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self._reaper = asyncio.create_task(self._reap_idle())

    async def stop(self, drain_timeout: float | None = None) -> None:
        """Drain and stop: refuse new sessions, give running ones `drain_timeout`
        seconds, close the rest (code 1001), clean every episode up and release the
        environment's resources."""
        self._draining = True
        deadline = time.monotonic() + (
            self.drain_timeout if drain_timeout is None else drain_timeout
        )
        while (self.sessions or self._rollouts) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for number, socket in list(self._sockets.items()):
            self._end_reason(number, "drained")
            with contextlib.suppress(Exception):
                await socket.close(code=CLOSE_GOING_AWAY, message=b"server shutting down")
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()  # waits for the handlers, whose finally blocks clean up
        for session in list(self.sessions.values()):
            await self._close_session(session)
        release = getattr(self.environment, "aclose", None)
        if callable(release):
            result = release()
            if asyncio.iscoroutine(result):
                await result

    async def __aenter__(self) -> EnvServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def draining(self) -> bool:
        """True once `stop()` began: new sessions are refused."""
        return self._draining

    # ------------------------------------------------------------------ HTTP routes

    @web.middleware
    async def _authorize(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self.token is None or request.path == "/health":
            return await handler(request)
        given = request.headers.get("Authorization", "")
        scheme, _, credential = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            credential.strip().encode(), self.token.encode()
        ):
            why = "no bearer token was sent" if not given else "the bearer token is wrong"
            return web.json_response(
                {"error": f"{why}: {_TOKEN_HINT}", "code": "UNAUTHORIZED"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="vfgym serve-env"'},
            )
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "healthy"})

    async def _schema(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}
        )

    async def _metadata(self, request: web.Request) -> web.Response:
        from importlib.metadata import PackageNotFoundError, version

        try:
            vfgym_version: str | None = version("vfgym")
        except PackageNotFoundError:
            vfgym_version = None
        doc = (type(self.environment).__doc__ or "").strip().split("\n\n")[0]
        description = " ".join(doc.split()) or f"the vfgym environment {self.env_id}"
        return web.json_response(
            {
                "name": self.env_id,
                "description": description,
                "version": vfgym_version,
                "author": None,
                "documentation_url": None,
                "readme_content": None,
            }
        )

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(self.info())

    def info(self) -> dict[str, Any]:
        """What `/vfgym/info` reports: what RemoteEnv needs and the server's load."""
        return {
            "env_id": self.env_id,
            "chat": self.environment.message_type == "chat",
            "max_text_length": self.max_text_length,
            "max_sessions": self.max_sessions,
            "active_sessions": len(self.sessions),
            "idle_timeout": self.idle_timeout,
            "max_frame_bytes": self.max_frame_bytes,
            "draining": self._draining,
            "sessions_ended": dict(self.ended),
        }

    # ------------------------------------------------------------------ sessions

    def refusal(self) -> tuple[str, dict[str, Any]] | None:
        """Why a new session (or rollout) would be refused now, or None."""
        if self._draining:
            return "the server is shutting down; connect to another one or retry later", {}
        active = len(self.sessions) + self._rollouts
        if active >= self.max_sessions:
            return (
                f"the server is at capacity ({active} of --max-sessions {self.max_sessions} "
                "sessions); close a session, retry later, or start the server with a higher "
                "--max-sessions",
                {"active_sessions": active, "max_sessions": self.max_sessions},
            )
        return None

    def claim_rollout(self) -> bool:
        """Take a session slot for a whole rollout; False when there is none."""
        if self.refusal() is not None:
            return False
        self._rollouts += 1
        return True

    def release_rollout(self) -> None:
        """Give back the slot of `claim_rollout`."""
        self._rollouts -= 1

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(
            max_msg_size=self.max_frame_bytes, heartbeat=min(30.0, self.idle_timeout)
        )
        await socket.prepare(request)
        refused = self.refusal()
        if refused is not None:
            message, extra = refused
            with contextlib.suppress(Exception):
                await socket.send_str(error_frame(message, CAPACITY_REACHED, **extra))
                await socket.close(code=CLOSE_TRY_AGAIN, message=b"at capacity")
            return socket
        try:
            self._opened += 1
            session = Session(self._opened, self.environment, self.max_text_length)
        except Exception as exc:
            logger.exception("could not open a session")
            with contextlib.suppress(Exception):
                await socket.send_str(
                    error_frame(f"could not open a session: {exc}", SESSION_ERROR)
                )
                await socket.close()
            return socket
        self.sessions[session.number] = session
        self._sockets[session.number] = socket
        try:
            await self._serve_session(session, socket)
        except Exception:
            logger.exception("session %d failed", session.number)
            self._end_reason(session.number, "error")
        finally:
            reason = self._reasons.pop(session.number, "client")
            self.ended[reason] = self.ended.get(reason, 0) + 1
            self._sockets.pop(session.number, None)
            await self._close_session(session)
            with contextlib.suppress(Exception):
                await socket.close()
        return socket

    async def _serve_session(self, session: Session, socket: web.WebSocketResponse) -> None:
        async for message in socket:
            session.touch()
            if message.type is WSMsgType.ERROR:
                self._on_socket_error(session, message.data)
                return
            if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            self._busy.add(session.number)
            try:
                reply = await self._answer(session, message.data)
            finally:
                self._busy.discard(session.number)
                session.touch()
            if reply is None:  # a close frame
                self._end_reason(session.number, "client")
                await socket.close(code=1000, message=b"closed by the client")
                return
            try:
                async with asyncio.timeout(self.send_timeout):  # (no task per frame)
                    await socket.send_str(reply)
            except ConnectionError:  # the client went away mid-step
                self._end_reason(session.number, "client")
                return
            except TimeoutError:
                self._end_reason(session.number, "slow")
                logger.warning(
                    "session %d: the client did not take a frame within %.0f s; dropped",
                    session.number,
                    self.send_timeout,
                )
                return

    def _on_socket_error(self, session: Session, exc: BaseException) -> None:
        too_big = getattr(exc, "code", None) == CLOSE_TOO_BIG
        self._end_reason(session.number, "too_big" if too_big else "error")
        if too_big:
            logger.warning(
                "session %d sent a frame over --max-frame-bytes %d; ended (close code 1009)",
                session.number,
                self.max_frame_bytes,
            )
        else:
            logger.warning("session %d: broken connection: %s", session.number, exc)

    async def _answer(self, session: Session, text: str | bytes) -> str | None:
        """The reply frame to one client frame (None for `close`)."""
        try:
            kind, data = parse_client_frame(text)
            if kind == "close":
                return None
            if kind == "reset":
                return encode({"type": "observation", "data": await session.reset(data)})
            if kind == "step":
                return encode({"type": "observation", "data": await session.step(data)})
            return encode({"type": "state", "data": session.state()})
        except FrameError as exc:
            return error_frame(str(exc), exc.code)
        except Exception as exc:  # the environment's bug: said, and the server goes on
            logger.exception("session %d: unexpected failure", session.number)
            return error_frame(f"{type(exc).__name__}: {exc}", EXECUTION_ERROR)

    async def _close_session(self, session: Session) -> None:
        self.sessions.pop(session.number, None)
        try:
            await session.close()
        except Exception:
            logger.exception("session %d: its episode's cleanup failed", session.number)

    def _end_reason(self, number: int, reason: str) -> None:
        """Note why session `number` is ending; the first reason given wins."""
        self._reasons.setdefault(number, reason)

    async def _reap_idle(self) -> None:
        """End sessions silent for `idle_timeout` seconds (their cleanup frees their sandbox)."""
        period = min(1.0, self.idle_timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for number, session in list(self.sessions.items()):
                if number in self._busy or now - session.last_active < self.idle_timeout:
                    continue
                socket = self._sockets.get(number)
                if socket is None:
                    continue
                self._end_reason(number, "idle")
                message = (
                    f"session closed after {self.idle_timeout:g} s without a frame "
                    "(--idle-timeout); reconnect to start a new one"
                )
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        socket.send_str(error_frame(message, SESSION_ERROR)), 1.0
                    )
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        socket.close(code=CLOSE_POLICY, message=b"idle timeout"), 2.0
                    )


def _share_sandboxes(environment: MultiTurnEnv, max_sessions: int) -> None:
    """Size every SandboxEnv's pool (itself or a group member's) for `max_sessions`
    episodes at once, unless its loader was given a `pool_size` other than the default:
    each running session holds one sandbox."""
    for member in _sandbox_envs(environment):
        if member.pool_size == 4:  # SandboxEnv's default: the server decides
            member.pool_size = max_sessions


def _sandbox_envs(environment: Any) -> list[SandboxEnv]:
    if isinstance(environment, SandboxEnv):
        return [environment]
    if isinstance(environment, EnvGroup):
        return [found for member in environment.envs for found in _sandbox_envs(member)]
    return []
