"""Reaching the Docker Engine: the SDK client for the control plane and the endpoint
address for the data stream."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlparse

import docker
from docker.errors import DockerException

from vfgym.errors import DockerUnavailableError

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
# Control-plane calls of a pool run in threads at once (start, wipe, remove).
MAX_CONNECTIONS = 32
START_HINT = (
    "Start a Docker Engine (as root: `sudo bash sandboxes/setup-docker.sh` from the vfgym "
    "repository), or point DOCKER_HOST / SandboxConfig.docker_host at a reachable one; "
    "`python -m vfgym.sandbox doctor` checks the setup."
)
PERMISSION_FIX = "sudo usermod -aG docker $USER, then log in again"
PERMISSION_HINT = (
    "The engine's socket refused this user (permission denied): add the user to the docker "
    "group (`sudo usermod -aG docker $USER`, then log in again), run as a user who may use "
    "the socket, or point DOCKER_HOST "
    "/ SandboxConfig.docker_host at an endpoint this user may use; "
    "`python -m vfgym.sandbox doctor` checks the setup."
)


def is_permission_problem(exc: BaseException | None) -> bool:
    """Whether connecting failed because the socket refused this user, which needs a
    different fix (group membership) than a daemon that is not running."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, PermissionError) or any(
            isinstance(arg, PermissionError) for arg in exc.args
        ):
            return True
        if "PermissionError" in str(exc) or "Permission denied" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def docker_host(configured: str | None) -> str:
    """The endpoint in use: the config's, else DOCKER_HOST, else the local socket."""
    return configured or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def make_client(configured: str | None, timeout: float = 120.0) -> docker.DockerClient:
    """An SDK client for `configured` (or the environment), checked with a ping."""
    host = docker_host(configured)
    try:
        if configured:
            client = docker.DockerClient(
                base_url=host, timeout=int(timeout), max_pool_size=MAX_CONNECTIONS
            )
        else:
            client = docker.from_env(timeout=int(timeout), max_pool_size=MAX_CONNECTIONS)
        client.ping()
    except DockerException as exc:
        hint = PERMISSION_HINT if is_permission_problem(exc) else START_HINT
        raise DockerUnavailableError(
            f"cannot reach a Docker Engine at {host}: {exc}. {hint}"
        ) from exc
    return client


@dataclass(frozen=True)
class StreamEndpoint:
    """Where the raw attach stream connects: a unix socket path or a TCP host and port."""

    unix_path: str | None = None
    host: str | None = None
    port: int | None = None
    api_version: str = "1.41"


def stream_endpoint(configured: str | None, api_version: str) -> StreamEndpoint:
    """Parse the Docker endpoint for the data plane, which bypasses the SDK.

    Only plain unix and TCP endpoints are supported: the stream is a hijacked HTTP
    connection opened directly on the event loop.
    """
    host = docker_host(configured)
    url = urlparse(host)
    if url.scheme in ("unix", "http+unix"):
        return StreamEndpoint(unix_path=url.path, api_version=api_version)
    if url.scheme in ("tcp", "http"):
        if os.environ.get("DOCKER_TLS_VERIFY") and not configured:
            raise DockerUnavailableError(
                f"{host} uses TLS (DOCKER_TLS_VERIFY is set), which the sandbox stream does not "
                "support yet; use a unix socket or a plain TCP endpoint on a private network"
            )
        if not url.hostname or not url.port:
            raise DockerUnavailableError(f"cannot parse host and port from {host!r}")
        return StreamEndpoint(host=url.hostname, port=url.port, api_version=api_version)
    raise DockerUnavailableError(
        f"Docker endpoint {host!r} has scheme {url.scheme!r}; the sandbox stream supports "
        "unix:// and tcp:// endpoints"
    )
