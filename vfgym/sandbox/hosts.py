"""Several Docker Engines behind one pool: which endpoints, where the next sandbox goes,
and which hosts are down.

A pool may outgrow one machine's cores; rather than shard by hand, the user names
several endpoints and the pool places each new sandbox on the reachable host with the
most free capacity. A host that stops answering is set aside (its running sandboxes
fail as infrastructure errors) and probed again later, so it is used again once its
daemon is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import docker
from docker.errors import DockerException

from vfgym.errors import DockerUnavailableError, SandboxImageError
from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.docker_client import docker_host, make_client
from vfgym.sandbox.gc import remove_orphans
from vfgym.sandbox.image import image_exists

logger = logging.getLogger(__name__)

#: Comma-separated Docker endpoints for any pool made without an explicit host.
HOSTS_VARIABLE = "VFGYM_DOCKER_HOSTS"
#: How long a host that failed is left alone before it is asked again.
RETRY_AFTER_S = 2.0


def hosts_from_environment(value: str | None = None) -> tuple[str, ...]:
    """The endpoints named in VFGYM_DOCKER_HOSTS (or `value`), blanks dropped."""
    raw = os.environ.get(HOSTS_VARIABLE, "") if value is None else value
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def pool_endpoints(config: SandboxConfig) -> tuple[str | None, ...]:
    """The endpoints a pool of `config` uses, most explicit first: the config's list,
    its single host, VFGYM_DOCKER_HOSTS, else None (DOCKER_HOST or the local socket)."""
    if config.docker_hosts:
        return tuple(config.docker_hosts)
    if config.docker_host:
        return (config.docker_host,)
    return hosts_from_environment() or (None,)


def is_connection_failure(exc: BaseException) -> bool:
    """Whether `exc` means the daemon did not answer (as opposed to refusing a request)."""
    if isinstance(exc, DockerUnavailableError | ConnectionError):
        return True
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        if name in ("ConnectionError", "ConnectionRefusedError", "NewConnectionError"):
            return True
        if isinstance(current, FileNotFoundError):  # the unix socket is gone
            return True
        current = current.__cause__ or current.__context__
    return False


@dataclass(eq=False)
class DockerHost:
    """One Docker endpoint of a pool, with what the pool has placed on it."""

    endpoint: str | None
    limit: int | None = None
    client: docker.DockerClient | None = None
    placed: int = 0
    cpus: int = 1
    down_until: float = 0.0  # monotonic time before which the host is not asked
    last_error: BaseException | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The endpoint as it is reached (DOCKER_HOST or the local socket for None)."""
        return docker_host(self.endpoint)

    @property
    def up(self) -> bool:
        return self.client is not None

    def free(self, cpus_per_sandbox: float) -> float:
        """Room left: the hard limit if one is set, else what its CPUs hold."""
        capacity = self.limit if self.limit is not None else self.cpus / cpus_per_sandbox
        return capacity - self.placed

    def full(self) -> bool:
        return self.limit is not None and self.placed >= self.limit


class HostSet:
    """The Docker hosts of one pool: connect, clear orphans and ensure the image on
    each, choose where a sandbox goes, and set aside hosts that stopped answering."""

    def __init__(self, config: SandboxConfig, image: str) -> None:
        self.config = config
        self.image = image
        self.hosts = [
            DockerHost(endpoint, config.host_limit) for endpoint in pool_endpoints(config)
        ]
        self._lock = asyncio.Lock()
        self._opened = asyncio.Event()  # placing waits until open() is over

    def by_endpoint(self, endpoint: str | None) -> DockerHost | None:
        for host in self.hosts:
            if host.endpoint == endpoint:
                return host
        return None

    def config_for(self, host: DockerHost) -> SandboxConfig:
        """The config of a sandbox on `host`: the same limits, that host's endpoint."""
        return self.config.replace(docker_host=host.endpoint, docker_hosts=())

    async def open(self, remove_orphans_on_start: bool) -> None:
        """Connect to every host; raise only when none can take sandboxes.

        With one host its own error is raised as before (no daemon, no image); with
        several, a host that is down or lacks the image and cannot get it is set aside
        and asked again later.
        """
        try:
            await self._open(remove_orphans_on_start)
        finally:
            self._opened.set()

    async def _open(self, remove_orphans_on_start: bool) -> None:
        results = await asyncio.gather(
            *(self._connect(host, remove_orphans_on_start) for host in self.hosts),
            return_exceptions=True,
        )
        errors = [item for item in results if isinstance(item, BaseException)]
        for item in errors:
            if not isinstance(item, Exception):
                raise item  # cancellation and the like
        if not any(host.up for host in self.hosts):
            raise errors[0]
        for host in self.hosts:
            if host.up:
                await self._ensure_image(host)
        if not any(host.up for host in self.hosts):
            raise next(h.last_error for h in self.hosts if h.last_error is not None)

    async def _connect(self, host: DockerHost, remove_orphans_on_start: bool) -> None:
        try:
            client = await asyncio.to_thread(make_client, host.endpoint)
        except Exception as exc:
            self._set_aside(host, exc)
            raise
        try:
            if remove_orphans_on_start:
                removed = await asyncio.to_thread(remove_orphans, client)
                if removed:
                    logger.info(
                        "removed %d orphaned sandbox containers on %s", len(removed), host.name
                    )
            info = await asyncio.to_thread(client.info)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                client.close()
            if isinstance(exc, Exception):
                self._set_aside(host, exc)
            raise
        host.cpus = int(info.get("NCPU") or 1)
        host.client = client
        host.down_until = 0.0

    async def _ensure_image(self, host: DockerHost) -> None:
        """Make sure `host` has the sandbox image, copying it from a host that has it."""
        assert host.client is not None
        try:
            if await asyncio.to_thread(image_exists, host.client, self.image):
                return
            source = None
            for other in self.hosts:
                if other is not host and other.client is not None:
                    with contextlib.suppress(DockerException, OSError):
                        if await asyncio.to_thread(image_exists, other.client, self.image):
                            source = other
                            break
            if source is None:
                raise SandboxImageError(
                    f"sandbox image {self.image!r} is not on the Docker Engine at {host.name} "
                    "nor on any other host of the pool; build it there with "
                    f"`DOCKER_HOST={host.name} python -m vfgym.sandbox build` "
                    "(or set SandboxConfig.image)"
                )
            logger.info(
                "copying sandbox image %s from %s to %s", self.image, source.name, host.name
            )
            assert source.client is not None
            await asyncio.to_thread(copy_image, source.client, host.client, self.image)
        except Exception as exc:
            if len(self.hosts) == 1:
                raise
            logger.warning("setting Docker host %s aside: %s", host.name, exc)
            self._set_aside(host, exc)

    def _set_aside(self, host: DockerHost, exc: BaseException) -> None:
        """Stop placing sandboxes on `host` until RETRY_AFTER_S has passed."""
        host.last_error = exc
        host.down_until = time.monotonic() + RETRY_AFTER_S
        if host.client is not None:
            with contextlib.suppress(Exception):
                host.client.close()
            host.client = None

    def mark_down(self, endpoint: str | None, exc: BaseException) -> None:
        """A call to `endpoint` found its daemon gone: place nothing there for now."""
        host = self.by_endpoint(endpoint)
        if host is not None and host.up:
            logger.warning(
                "Docker host %s stopped answering (%s); using the others", host.name, exc
            )
            self._set_aside(host, exc)

    async def place(self) -> DockerHost:
        """The host for a new sandbox (its count already raised): the reachable one with
        the most free capacity. Hosts set aside are asked again once their wait is over."""
        await self._opened.wait()
        async with self._lock:
            await self._revive_due()
            candidates = [h for h in self.hosts if h.up and not h.full()]
            if not candidates:
                raise self._nowhere_error()
            host = max(candidates, key=lambda h: h.free(self.config.cpus))
            host.placed += 1
            return host

    def release(self, endpoint: str | None) -> None:
        """A sandbox placed on `endpoint` is gone: its room is free again."""
        host = self.by_endpoint(endpoint)
        if host is not None and host.placed > 0:
            host.placed -= 1

    async def _revive_due(self) -> None:
        now = time.monotonic()
        for host in self.hosts:
            if host.up or host.down_until > now:
                continue
            try:
                await self._connect(host, remove_orphans_on_start=True)
            except Exception:
                continue
            await self._ensure_image(host)
            if host.up:
                logger.info("Docker host %s answers again; placing sandboxes on it", host.name)

    def _nowhere_error(self) -> Exception:
        if len(self.hosts) == 1 and self.hosts[0].last_error is not None:
            error = self.hosts[0].last_error
            return error if isinstance(error, Exception) else DockerUnavailableError(str(error))
        if any(h.up for h in self.hosts):
            return DockerUnavailableError(
                "every reachable Docker host of the pool is at its limit "
                f"(host_limit={self.config.host_limit}); raise host_limit, add hosts to "
                "SandboxConfig.docker_hosts, or make the pool smaller"
            )
        reasons = "; ".join(f"{h.name}: {h.last_error}" for h in self.hosts)
        return DockerUnavailableError(
            f"no Docker host of the pool answers ({reasons}); start their daemons or fix "
            f"SandboxConfig.docker_hosts / {HOSTS_VARIABLE}"
        )

    def clients(self) -> list[docker.DockerClient]:
        """Clients of the hosts that answer now (for cleanup)."""
        return [host.client for host in self.hosts if host.client is not None]

    def close(self) -> None:
        for host in self.hosts:
            if host.client is not None:
                with contextlib.suppress(Exception):
                    host.client.close()
                host.client = None


def copy_image(source: docker.DockerClient, target: docker.DockerClient, image: str) -> None:
    """Stream `image` from one daemon to another (`docker save | docker load`), without
    holding it in memory or on disk here."""
    stream: Iterable[bytes] = source.api.get_image(image, chunk_size=1 << 20)
    target.api.load_image(stream)
    if not image_exists(target, image):
        raise SandboxImageError(f"copying {image!r} to another Docker host did not leave it there")
