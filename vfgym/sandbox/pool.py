"""A per-process pool of warm sandboxes, wiped between users."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from types import TracebackType

import docker

from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.errors import SandboxClosedError, SandboxError, SandboxImageError
from vfgym.sandbox.gc import remove_orphans, sandbox_containers
from vfgym.sandbox.image import default_image, image_exists
from vfgym.sandbox.labels import POOL_LABEL
from vfgym.sandbox.sandbox import DockerSandbox, remove_container

logger = logging.getLogger(__name__)

_CLOSED_WHILE_STARTING = (
    "the pool was closed while a sandbox was being started for this acquire; "
    "create a new SandboxPool"
)


class SandboxPool:
    """Hands out warm sandboxes: `async with pool.acquire() as sandbox: ...`.

    On release a sandbox is reset (processes killed, workspace, /tmp and /dev/shm
    emptied, Python session and environment fresh) and goes back to the pool; one
    that cannot be proven clean, that broke, or that reached `config.max_uses` is
    destroyed and replaced in the background. At start the pool removes orphaned
    containers left by dead processes. Create one pool per process (or per event
    loop); it holds no global state.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        size: int = 4,
        *,
        remove_orphans_on_start: bool = True,
        start_concurrency: int = 4,
    ) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError(f"size must be a positive number of sandboxes, got {size!r}")
        if (
            not isinstance(start_concurrency, int)
            or isinstance(start_concurrency, bool)
            or start_concurrency <= 0
        ):
            raise ValueError(
                f"start_concurrency must be a positive integer, got {start_concurrency!r}"
            )
        if config is not None and not isinstance(config, SandboxConfig):
            raise TypeError(
                f"config must be a SandboxConfig (e.g. SandboxConfig(timeout=5)), "
                f"got {type(config).__name__}"
            )
        self.config = config if config is not None else SandboxConfig()
        self.size = size
        self.pool_id = uuid.uuid4().hex[:16]
        self._remove_orphans_on_start = remove_orphans_on_start
        self._start_gate = asyncio.Semaphore(start_concurrency)
        self._client: docker.DockerClient | None = None
        self._idle: collections.deque[DockerSandbox] = collections.deque()
        self._leased: set[DockerSandbox] = set()
        self._count = 0  # sandboxes that exist or are being created
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False
        self.last_error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, clear orphans, check the image and warm up `size` sandboxes."""
        if self._closed:
            raise SandboxClosedError("this pool was closed; create a new SandboxPool")
        if self._started:
            return
        self._started = True
        try:
            self._client = await asyncio.to_thread(make_client, self.config.docker_host)
            if self._remove_orphans_on_start:
                removed = await asyncio.to_thread(remove_orphans, self._client)
                if removed:
                    logger.info("removed %d orphaned sandbox containers", len(removed))
            image = self.config.image or default_image()
            if not await asyncio.to_thread(image_exists, self._client, image):
                raise SandboxImageError(
                    f"sandbox image {image!r} is not on this Docker Engine; build it with "
                    "`python -m vfgym.sandbox build` (or set SandboxConfig.image)"
                )
            # An acquire made while the image was checked may have counted (and be
            # starting) a sandbox of its own: warm up only the rest.
            missing = self.size - self._count
            self._count = self.size
            created = await asyncio.gather(
                *(self._create() for _ in range(missing)), return_exceptions=True
            )
            errors = [item for item in created if isinstance(item, BaseException)]
            for item in created:
                if isinstance(item, DockerSandbox):
                    self._idle.append(item)
            if errors:
                self._count -= len(errors)
                raise errors[0]
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Destroy every sandbox of the pool, idle or leased. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        doomed = [*self._idle, *self._leased]
        self._idle.clear()
        self._leased.clear()
        await asyncio.gather(*(sandbox.close() for sandbox in doomed), return_exceptions=True)
        async with self._changed:
            self._changed.notify_all()
        if self._client is not None:
            await self._remove_strays(self._client)
            with contextlib.suppress(Exception):
                self._client.close()

    async def _remove_strays(self, client: docker.DockerClient) -> None:
        """Remove every container with this pool's label that it no longer tracks.

        A start cut short (by cancellation, or a broken daemon connection) can
        leave a container the pool never learned of; one never started is never
        auto-removed, so without this sweep it would outlive the process.
        """
        try:
            removed = await asyncio.to_thread(_remove_pool_containers, client, self.pool_id)
        except Exception as exc:  # closing must not fail on a sweep: say what to run instead
            logger.warning(
                "could not check for leftover containers of sandbox pool %s: %s; "
                "`python -m vfgym.sandbox gc` removes them once this process has exited",
                self.pool_id,
                exc,
            )
            return
        if removed:
            logger.info("removed %d untracked containers of sandbox pool %s", removed, self.pool_id)

    def destroy_now(self) -> int:
        """Force-remove this pool's containers without an event loop; returns how many.

        For the case `close()` cannot be awaited: the loop that ran the pool is gone
        (a notebook restart, a finished `asyncio.run`). Blocking; call it from sync code.
        """
        self._closed = True
        client = make_client(self.config.docker_host)
        try:
            removed = _remove_pool_containers(client, self.pool_id)
        finally:
            client.close()
        self._idle.clear()
        self._leased.clear()
        return removed

    @property
    def idle(self) -> int:
        """Warm sandboxes ready to hand out right now."""
        return len(self._idle)

    # ------------------------------------------------------------------ lending

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[DockerSandbox]:
        """Lend a warm sandbox for the duration of the `async with` block."""
        sandbox = await self._take()
        self._leased.add(sandbox)
        try:
            yield sandbox
        finally:
            release = asyncio.ensure_future(self._release(sandbox))
            try:
                await asyncio.shield(release)
            except asyncio.CancelledError:
                # The release finishes in the background; the sandbox is never lost.
                self._track(release)
                raise

    async def _take(self) -> DockerSandbox:
        """A live sandbox; one that died while idle (its container was killed from
        outside) is never handed out but destroyed and replaced in the background."""
        while True:
            sandbox = await self._take_one()
            if sandbox.alive and not sandbox.container_exited:
                return sandbox
            logger.warning("idle sandbox %s had died; replacing it", sandbox.container_id)
            self._track(asyncio.ensure_future(self._release(sandbox)))

    async def _take_one(self) -> DockerSandbox:
        if self._idle and not self._closed:
            return self._idle.popleft()  # the common case: no await, no lock
        self._require_open()
        async with self._changed:
            while True:
                self._require_open()
                if self._idle:
                    return self._idle.popleft()
                if self._count < self.size:
                    self._count += 1
                    break
                try:
                    await self._changed.wait()
                except asyncio.CancelledError:
                    # A wake-up may have been meant for this task; pass it on, or a
                    # returned sandbox sits idle while the next waiter sleeps for ever
                    # (Python before 3.13 drops it). The lock is held again here.
                    self._changed.notify()
                    raise
        try:
            sandbox = await self._create()
        except BaseException as exc:
            await self._forget_one()
            if self._closed and isinstance(exc, Exception):  # close() removed it mid-start
                raise SandboxClosedError(_CLOSED_WHILE_STARTING) from exc
            raise
        if self._closed:  # started after close() swept the pool: never hand it out
            await sandbox.close()
            raise SandboxClosedError(_CLOSED_WHILE_STARTING)
        return sandbox

    async def _release(self, sandbox: DockerSandbox) -> None:
        self._leased.discard(sandbox)
        healthy = sandbox.alive and not sandbox.container_exited
        if not self._closed and healthy and sandbox.uses < self.config.max_uses:
            try:
                await sandbox.reset()
            except SandboxError as exc:
                logger.warning("sandbox %s failed its wipe: %s", sandbox.container_id, exc)
            else:
                if not self._closed:
                    self._idle.append(sandbox)
                    async with self._changed:
                        self._changed.notify()
                    return
        await sandbox.close()
        await self._forget_one()
        if not self._closed:
            self._track(asyncio.ensure_future(self._refill()))

    # ------------------------------------------------------------------ internals

    def _require_open(self) -> None:
        if self._closed:
            raise SandboxClosedError("this pool is closed; create a new SandboxPool")
        if not self._started:
            raise SandboxClosedError(
                "this pool was not started; use `async with SandboxPool(...)` or await start()"
            )

    def _track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._tasks.discard)  # type: ignore[arg-type]

    async def _create(self) -> DockerSandbox:
        async with self._start_gate:
            sandbox = DockerSandbox(self.config, client=self._client, pool_id=self.pool_id)
            await sandbox.start()
            return sandbox

    async def _forget_one(self) -> None:
        async with self._changed:
            self._count -= 1
            self._changed.notify()

    async def _refill(self) -> None:
        """Replace a destroyed sandbox so the pool stays warm."""
        async with self._changed:
            if self._closed or self._count >= self.size:
                return
            self._count += 1
        try:
            sandbox = await self._create()
        except BaseException as exc:
            self.last_error = exc
            await self._forget_one()
            if not isinstance(exc, asyncio.CancelledError):
                logger.warning("could not replace a sandbox: %s", exc)
            return
        if self._closed:
            await sandbox.close()
            return
        self._idle.append(sandbox)
        async with self._changed:
            self._changed.notify()


def _remove_pool_containers(client: docker.DockerClient, pool_id: str) -> int:
    """Force-remove every container labelled as pool `pool_id`'s; returns how many."""
    doomed = sandbox_containers(client, f"{POOL_LABEL}={pool_id}")
    for container_id in doomed:
        remove_container(client, container_id)
    return len(doomed)
