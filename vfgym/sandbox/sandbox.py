"""One hardened Docker container with a long-lived runner inside."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
import threading
import time
import uuid
from types import TracebackType
from typing import Any

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from vfgym.errors import (
    DockerHostLostError,
    SandboxClosedError,
    SandboxError,
    SandboxFileError,
    SandboxFileNotFoundError,
    SandboxImageError,
    SandboxLoopError,
    SandboxLostError,
    SandboxPathError,
    SandboxStartError,
)
from vfgym.sandbox.channel import RunnerChannel
from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.container import create_kwargs
from vfgym.sandbox.docker_client import docker_host, make_client, stream_endpoint
from vfgym.sandbox.image import default_image
from vfgym.sandbox.labels import sandbox_labels
from vfgym.sandbox.paths import workspace_relative
from vfgym.sandbox.result import ExecResult
from vfgym.sandbox.rlimits import rlimit_error
from vfgym.sandbox.seccomp import check_runner_report

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 2
# Time the runner gets beyond a call's own timeout to kill, clean up and answer.
REPLY_GRACE_S = 10.0
CONTROL_TIMEOUT_S = 30.0
# How long a lost sandbox's daemon must keep answering for the loss to be the sandbox's own.
HOST_GONE_GRACE_S = 3.0
# How long closing waits for a removal that Docker already has under way.
REMOVAL_WAIT_S = 30.0

LEASE_ENDED = (
    "this sandbox's lease has ended (it went back to its pool for the next user); use a "
    "pooled sandbox only inside `async with pool.acquire() as sandbox:` and acquire again "
    "for more work"
)
OTHER_LOOP = (
    "this sandbox was called from another event loop than the one it started on (each "
    "asyncio.run() makes a new one), and its stream belongs to that loop: call it from "
    "that loop, e.g. make a tool that uses it `async def` and `await sandbox.run_python(...)` "
    "rather than running it with asyncio.run() in a sync tool"
)
CLOSED_DURING_CALL = (
    "the sandbox was closed while the call ran (its pool was closed, or close() was "
    "called); acquire a sandbox from an open pool to go on"
)


def _max_frame(config: SandboxConfig) -> int:
    """The largest reply the host accepts: capped output (JSON may escape each byte
    into six) or a base64 file, plus room for the envelope."""
    output = 6 * 3 * config.output_limit
    files = (config.max_read_bytes * 4) // 3 + 16  # type: ignore[operator]
    return max(output, files) + 64 * 1024


class DockerSandbox:
    """A warm container that runs Python and shell code for one user at a time.

    Use it as an async context manager. `run_python` keeps its interpreter state
    between calls like a notebook; `reset()` wipes processes, files, interpreter
    state and environment. Pools share one Docker client among many sandboxes;
    a standalone sandbox makes its own.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        client: docker.DockerClient | None = None,
        pool_id: str | None = None,
    ) -> None:
        self.config = config if config is not None else SandboxConfig()
        self._client = client
        self._owns_client = client is None
        self._pool_id = pool_id or f"solo-{uuid.uuid4().hex[:12]}"
        self._channel: RunnerChannel | None = None
        self.container_id: str | None = None
        self.runner_info: dict[str, Any] = {}
        self.uses = 0
        self._closed = False
        self._retired = False  # a pool's lease on it ended: see hand_over()
        self._lost: str | None = None
        self._lost_state: dict[str, Any] | None = None  # the container's, when it was lost
        self._loop: asyncio.AbstractEventLoop | None = None  # the one its stream is bound to

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> DockerSandbox:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def alive(self) -> bool:
        """True while the sandbox can take calls."""
        return (
            self._channel is not None
            and not self._closed
            and self._lost is None
            and not self._channel.broken
        )

    @property
    def container_exited(self) -> bool:
        """True once the container's stream has ended (it exited or was killed from
        outside), known without a call: a pool never lends a sandbox that died idle."""
        return self._channel is not None and self._channel.peer_closed

    async def start(self) -> None:
        """Create and start the container and wait until its runner answers."""
        if self._closed:
            raise SandboxClosedError("this sandbox was closed; create a new DockerSandbox")
        if self._channel is not None:
            return
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        config = self.config
        if self._client is None:
            self._client = await asyncio.to_thread(make_client, config.docker_host)
        client: docker.DockerClient = self._client
        image = config.image or default_image()
        kwargs = create_kwargs(client, config, image, sandbox_labels(self._pool_id, config.labels))
        try:
            self.container_id = await self._create_container(client, kwargs)
        except ImageNotFound as exc:
            raise SandboxImageError(
                f"sandbox image {image!r} is not on this Docker Engine; build it with "
                "`python -m vfgym.sandbox build` (or set SandboxConfig.image)"
            ) from exc
        except APIError as exc:
            raise SandboxStartError(f"could not create a sandbox container: {exc}") from exc
        endpoint = stream_endpoint(config.docker_host, client.api.api_version)
        self._loop = asyncio.get_running_loop()
        self._channel = await RunnerChannel.attach(
            endpoint, self.container_id, _max_frame(config), config.start_timeout
        )
        try:
            await asyncio.to_thread(client.api.start, self.container_id)
        except APIError as exc:
            refused = rlimit_error(str(exc), config, docker_host(config.docker_host))
            if refused is not None:
                raise SandboxStartError(refused) from exc
            hint = ""
            if "runtime" in str(exc).lower():
                hint = (
                    f" The runtime {config.runtime!r} may not be registered with the daemon: "
                    "run `sudo bash sandboxes/setup-docker.sh` or `python -m vfgym.sandbox doctor`."
                )
            raise SandboxStartError(f"could not start the sandbox container: {exc}.{hint}") from exc
        try:
            info = await self._channel.request({"op": "ping"}, config.start_timeout)
        except SandboxLostError as exc:
            raise SandboxStartError(
                f"the sandbox runner in image {image!r} did not start: {exc}. Rebuild the image "
                "with `python -m vfgym.sandbox build`."
            ) from exc
        if info.get("protocol") != PROTOCOL_VERSION:
            raise SandboxImageError(
                f"image {image!r} has runner protocol {info.get('protocol')!r}, this vfgym speaks "
                f"{PROTOCOL_VERSION}; rebuild it with `python -m vfgym.sandbox build`"
            )
        check_runner_report(info.get("seccomp"), config.runtime)
        self.runner_info = info

    async def _create_container(self, client: docker.DockerClient, kwargs: dict[str, Any]) -> str:
        """Create the container and return its id; a cancellation never loses it.

        The create call runs in a worker thread, which a cancellation cannot stop,
        and a container that is never started is never auto-removed: it would stay
        in Docker's "Created" state after this process ends. So on cancellation a
        container made already is recorded for `close()` (which `start()` runs),
        and one still being made is removed by the thread itself.
        """
        handoff = _CreateHandoff(client, kwargs)
        try:
            return await asyncio.to_thread(handoff.create)
        except asyncio.CancelledError:
            self.container_id = handoff.abandon()
            raise

    def hand_over(self) -> DockerSandbox:
        """A new handle on this warm container; this handle stops working for good.

        A pool calls it when a lease ends, so a reference its user kept (a background
        task, a stored object) cannot run code in the sandbox the next user gets:
        calls through it raise SandboxClosedError, and closing it removes nothing.
        A call already running finishes first (calls are serialised), and the pool's
        wipe comes after it.
        """
        successor = copy.copy(self)
        self._channel = None
        self._closed = True
        self._retired = True
        return successor

    async def close(self) -> None:
        """Stop and remove the container. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        channel, self._channel = self._channel, None
        try:
            if channel is not None:
                await channel.close()
        finally:  # a cancelled close still removes the container, then stays cancelled
            try:
                if self.container_id is not None and self._client is not None:
                    await asyncio.to_thread(remove_container, self._client, self.container_id)
            finally:
                if self._owns_client and self._client is not None:
                    with contextlib.suppress(Exception):
                        self._client.close()

    # ------------------------------------------------------------------ calls

    def _require_channel(self) -> RunnerChannel:
        if self._retired:
            raise SandboxClosedError(LEASE_ENDED)
        if self._closed:
            raise SandboxClosedError("this sandbox was closed; acquire or create a new one")
        if self._channel is None:
            raise SandboxClosedError("this sandbox was not started; use `async with` or start()")
        if self._lost is not None:
            raise SandboxLostError(f"this sandbox was lost earlier ({self._lost}); use a new one")
        if asyncio.get_running_loop() is not self._loop:
            # Refused before any byte is sent: a request from another loop would leave
            # the stream out of step, and the sandbox unusable for the next user.
            raise SandboxLoopError(OTHER_LOOP)
        return self._channel

    def _timeout(self, timeout: float | None) -> float:
        value = self.config.timeout if timeout is None else timeout
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        return float(value)

    async def _request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        channel = self._require_channel()
        try:
            return await channel.request(message, timeout)
        except SandboxLostError as exc:
            if self._closed and not self._retired:
                # Its owner closed it under the call: say so, and not that the code
                # crashed it (a `sandbox_lost` result tells a model it did).
                raise SandboxClosedError(CLOSED_DURING_CALL) from exc
            self._lost = str(exc)
            if self._client is not None and self.container_id is not None:
                # What Docker knows of the container (OOMKilled), read at once: after the
                # wait below an exited container may already be gone.
                self._lost_state = await asyncio.to_thread(
                    _container_state, self._client, self.container_id
                )
            if self._client is not None and not await _daemon_stays(self._client):
                # The whole host went away, not this sandbox alone: an infrastructure
                # failure, never something the model's code did.
                raise DockerHostLostError(
                    f"the Docker host {docker_host(self.config.docker_host)} of this sandbox "
                    f"stopped answering during the call ({exc}); a pool places new sandboxes "
                    "on its other hosts, and on this one again once its daemon is back"
                ) from exc
            raise

    async def run_python(self, code: str, timeout: float | None = None) -> ExecResult:
        """Run `code` in this sandbox's persistent Python session."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        return await self._execute({"op": "python", "code": code}, self._timeout(timeout))

    async def run_shell(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run `command` with bash in the workspace (a fresh shell per call)."""
        if not isinstance(command, str):
            raise TypeError(f"command must be a str, got {type(command).__name__}")
        return await self._execute({"op": "shell", "command": command}, self._timeout(timeout))

    async def _execute(self, message: dict[str, Any], timeout: float) -> ExecResult:
        """Run code; the call that takes the sandbox down returns a `sandbox_lost` result
        (so the model hears about it), later calls raise SandboxLostError."""
        self._require_channel()
        started = time.monotonic()
        message = {**message, "timeout": timeout, "output_limit": self.config.output_limit}
        self.uses += 1
        try:
            reply = await self._request(message, timeout + REPLY_GRACE_S)
        except SandboxLostError as exc:
            return await self._lost_result(str(exc), time.monotonic() - started)
        if not reply.get("ok"):
            raise SandboxError(f"the sandbox runner failed: {reply.get('message')}")
        return ExecResult(
            stdout=reply["stdout"],
            stderr=reply["stderr"],
            exit_code=reply["exit_code"],
            timed_out=bool(reply["timed_out"]),
            oom_killed=reply["oom_killed"],
            truncated=bool(reply["truncated"]),
            duration_s=float(reply["duration_s"]),
            value=reply.get("value"),
            state_reset=bool(reply.get("kernel_restarted", False)),
        )

    async def _lost_result(self, reason: str, duration: float) -> ExecResult:
        """A result for a call that took the sandbox down, with what Docker knows."""
        oom = None
        state = self._lost_state
        if state is None and self._client is not None and self.container_id is not None:
            state = await asyncio.to_thread(_container_state, self._client, self.container_id)
        if state is not None:
            oom = bool(state.get("OOMKilled"))
        return ExecResult(
            stdout="",
            stderr=f"sandbox lost: {reason}",
            exit_code=None,
            oom_killed=oom,
            duration_s=duration,
            sandbox_lost=True,
            state_reset=True,
        )

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write `data` to `path` inside the workspace (parents are created)."""
        relative = workspace_relative(path, self.config.workspace)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be bytes or str, got {type(data).__name__}")
        data = bytes(data)
        if len(data) > self.config.max_file_size:  # type: ignore[operator]
            raise SandboxFileError(
                f"{len(data)} bytes is over the sandbox's file size limit of "
                f"{self.config.max_file_size} bytes (SandboxConfig.max_file_size)"
            )
        message = {
            "op": "write",
            "path": relative,
            "data": base64.b64encode(data).decode("ascii"),
            "mode": mode,
        }
        self._check_file_reply(await self._request(message, CONTROL_TIMEOUT_S), path)

    async def read_file(self, path: str) -> bytes:
        """The bytes of the regular file at `path` inside the workspace."""
        relative = workspace_relative(path, self.config.workspace)
        message = {"op": "read", "path": relative, "max_bytes": self.config.max_read_bytes}
        reply = self._check_file_reply(await self._request(message, CONTROL_TIMEOUT_S), path)
        return base64.b64decode(reply["data"])

    @staticmethod
    def _check_file_reply(reply: dict[str, Any], path: str) -> dict[str, Any]:
        if reply.get("ok"):
            return reply
        kind, message = reply.get("error"), reply.get("message", "")
        if kind == "path":
            raise SandboxPathError(message)
        if kind == "not_found":
            raise SandboxFileNotFoundError(f"{path!r} does not exist in the sandbox workspace")
        if kind in ("too_large", "os"):
            raise SandboxFileError(message)
        raise SandboxError(f"the sandbox runner failed on {path!r}: {message}")

    async def reset(self) -> None:
        """Kill every process and wipe files, interpreter state and environment.

        Raises SandboxLostError when the sandbox cannot be proven clean; a pool
        then replaces it instead of handing it out again.
        """
        reply = await self._request({"op": "reset"}, CONTROL_TIMEOUT_S)
        if not reply.get("ok") or not reply.get("clean"):
            self._lost = f"reset left it dirty: {reply.get('problems') or reply.get('message')}"
            raise SandboxLostError(f"could not wipe the sandbox: {self._lost}")


class _CreateHandoff:
    """Hands a new container's id from Docker's worker thread to the event loop, or,
    when the loop side has given up on it (cancelled), removes the container."""

    def __init__(self, client: docker.DockerClient, kwargs: dict[str, Any]) -> None:
        self._client = client
        self._kwargs = kwargs
        self._lock = threading.Lock()
        self._abandoned = False
        self._container_id: str | None = None

    def create(self) -> str:
        """Create the container (in a worker thread); remove it if it was abandoned."""
        container_id: str = self._client.api.create_container(**self._kwargs)["Id"]
        with self._lock:
            if not self._abandoned:
                self._container_id = container_id
                return container_id
        try:
            remove_container(self._client, container_id)
        except Exception as exc:  # nobody waits for this thread: say what is left behind
            logger.warning(
                "could not remove sandbox container %s after its start was cancelled: %s; "
                "`python -m vfgym.sandbox gc` removes it",
                container_id[:12],
                exc,
            )
        return container_id

    def abandon(self) -> str | None:
        """Give the container up: its id if it exists already (the caller removes it);
        otherwise None, and the thread removes it once it is made."""
        with self._lock:
            self._abandoned = True
            return self._container_id


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    """Force-remove a container and return once it is gone; gone already is fine.

    Auto-remove often races this call ("removal already in progress", 409): the
    container is then still listed for a while, so wait for it to disappear, so that
    whoever closed a sandbox can rely on its container being gone.
    """
    with contextlib.suppress(NotFound):
        try:
            client.api.remove_container(container_id, force=True)
        except APIError as exc:
            if exc.status_code != 409:
                raise
            if "in progress" in str(exc):
                _wait_until_removed(client, container_id)


def _wait_until_removed(client: docker.DockerClient, container_id: str) -> None:
    deadline = time.monotonic() + REMOVAL_WAIT_S
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(container_id)
        except NotFound:
            return
        time.sleep(0.05)
    logger.warning(
        "sandbox container %s is still being removed after %.0fs; Docker finishes it on its own",
        container_id[:12],
        REMOVAL_WAIT_S,
    )


async def _daemon_stays(client: docker.DockerClient) -> bool:
    """Whether the daemon still answers a little after a sandbox was lost. A daemon
    that is shutting down stops its containers first and its API a moment later,
    so one ping at once would take a host going away for a crash of this sandbox."""
    deadline = time.monotonic() + HOST_GONE_GRACE_S
    while await asyncio.to_thread(_daemon_answers, client):
        if time.monotonic() >= deadline:
            return True
        await asyncio.sleep(0.25)
    return False


def _daemon_answers(client: docker.DockerClient) -> bool:
    """Whether the Docker daemon still answers a ping."""
    try:
        return bool(client.ping())
    except (DockerException, OSError):
        return False


def _container_state(client: docker.DockerClient, container_id: str) -> dict[str, Any] | None:
    try:
        return client.api.inspect_container(container_id).get("State")
    except (DockerException, OSError):
        return None
