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

from vfgym.errors import SandboxClosedError, SandboxError
from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.hosts import HostSet, is_connection_failure, pool_endpoints
from vfgym.sandbox.image import default_image
from vfgym.sandbox.labels import POOL_LABEL
from vfgym.sandbox.sandbox import DockerSandbox, remove_container

logger = logging.getLogger(__name__)

_CLOSED_WHILE_STARTING = (
    "the pool was closed while a sandbox was being started for this acquire; "
    "create a new SandboxPool"
)
_CLOSED_WHILE_POOL_STARTS = "the pool was closed while it started; create a new SandboxPool"
_OTHER_LOOP = (
    "this SandboxPool was started on another event loop and cannot be used from this one "
    "(each asyncio.run() makes a new loop): create one pool per event loop, or run all of "
    "its work on one loop. close() from here still removes its containers."
)


class SandboxPool:
    """Hands out warm sandboxes: `async with pool.acquire() as sandbox: ...`.

    On release a sandbox is reset (processes killed, workspace, /tmp and /dev/shm
    emptied, Python session and environment fresh) and goes back to the pool; one
    that cannot be proven clean, that broke, or that reached `config.max_uses` is
    destroyed and replaced in the background. At start the pool removes orphaned
    containers left by dead processes. Counters that only a new container starts
    afresh (pid and inode numbers, network and cgroup statistics) still let code pass
    a few bits to the next user of its container; `max_uses=1` in the config gives
    every user that ran code a fresh container instead. Create one pool per process (or per event
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
        self._hosts: HostSet | None = None
        self._idle: collections.deque[DockerSandbox] = collections.deque()
        self._leased: set[DockerSandbox] = set()
        self._count = 0  # sandboxes that exist or are being created
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False
        # The loop the pool was started on: its streams and locks work only there.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warmed = asyncio.Event()  # set once the first start() is over
        self._start_error: BaseException | None = None
        self._closing: asyncio.Future[None] | None = None
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
        """Connect, clear orphans, check the image and warm up `size` sandboxes.

        A second start() made meanwhile returns once the first is over (or raises
        why it failed), so its acquire finds the pool warm. A close() made meanwhile
        wins: start() then removes what it made and raises SandboxClosedError.
        """
        if self._closed:
            raise SandboxClosedError("this pool was closed; create a new SandboxPool")
        self._check_loop()
        if self._started:
            await self._warmed.wait()
            if self._closed:
                raise SandboxClosedError(
                    "this pool failed to start or was closed; create a new SandboxPool"
                ) from self._start_error
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        try:
            # Connect to every host (one unless several are configured), clear orphans
            # and make sure each has the image; a host that is down is asked again later.
            # An acquire made meanwhile waits in HostSet.place() until this is over.
            hosts = self._hosts = HostSet(self.config, self.config.image or default_image())
            await hosts.open(self._remove_orphans_on_start)
            if self._closed:  # close() ran meanwhile: it may have missed these clients
                hosts.close()
                raise SandboxClosedError(_CLOSED_WHILE_POOL_STARTS)
            if self._closed:
                raise SandboxClosedError(_CLOSED_WHILE_POOL_STARTS)
            # An acquire made while the image was checked may have counted (and be
            # starting) a sandbox of its own: warm up only the rest.
            missing = self.size - self._count
            self._count = self.size
            warmed = await asyncio.gather(
                *(self._warm_one() for _ in range(missing)), return_exceptions=True
            )
            errors = [item for item in warmed if isinstance(item, BaseException)]
            if errors:
                raise errors[0]
        except BaseException as exc:
            self._start_error = exc
            await self.close()
            raise
        finally:
            self._warmed.set()

    async def _warm_one(self) -> None:
        """Start one sandbox of the warm-up and put it in the pool at once: an acquire
        waiting meanwhile is woken for it, and close() finds it even if start() is
        cancelled before the rest are up."""
        try:
            sandbox = await self._create(_CLOSED_WHILE_POOL_STARTS)
        except BaseException:
            await self._forget_one()
            raise
        await self._add_idle(sandbox)

    async def close(self) -> None:
        """Destroy every sandbox of the pool, idle or leased, and wake every waiting
        acquirer with SandboxClosedError. Safe to call twice, and from several tasks:
        each returns once the pool is gone.

        The work runs in a task of its own, so a cancelled close() (a timeout, Ctrl-C)
        still finishes it in the background, and a later close() waits for it. From
        another event loop than the pool's, the containers are removed directly.
        """
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            if self._closing is None or not self._closing.done():
                await asyncio.to_thread(self.destroy_now)
            return
        if self._closing is None:
            self._closed = True
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        """close()'s work; each step runs even if an earlier one was cut short."""
        try:
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            # Leased sandboxes include those being wiped on release: closing one makes
            # its wipe fail, and the release then gives it up.
            doomed = [*self._idle, *self._leased]
            self._idle.clear()
            self._leased.clear()
            try:
                await asyncio.gather(
                    *(sandbox.close() for sandbox in doomed), return_exceptions=True
                )
            finally:
                try:
                    await self._notify(everyone=True)
                finally:
                    if self._hosts is not None:
                        for client in self._hosts.clients():
                            await self._remove_strays(client)
                        self._hosts.close()

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
        removed = 0
        failure: Exception | None = None
        for endpoint in pool_endpoints(self.config):  # every host, even one that failed
            try:
                client = make_client(endpoint)
                try:
                    removed += _remove_pool_containers(client, self.pool_id)
                finally:
                    client.close()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        self._idle.clear()
        self._leased.clear()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # Acquirers waiting on the pool's loop (running in another thread, or
            # later) must hear that it closed rather than wait for ever.
            with contextlib.suppress(RuntimeError):  # the loop closed just now
                loop.call_soon_threadsafe(self._wake_all_soon)
        return removed

    def _wake_all_soon(self) -> None:
        """On the pool's loop: wake every waiting acquirer (they then see it closed)."""
        self._track(asyncio.ensure_future(self._notify(everyone=True)))

    @property
    def idle(self) -> int:
        """Warm sandboxes ready to hand out right now."""
        return len(self._idle)

    # ------------------------------------------------------------------ lending

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[DockerSandbox]:
        """Lend a warm sandbox for the duration of the `async with` block.

        The sandbox works only inside the block: once it is given back, calls
        through it raise SandboxClosedError (the pool keeps the container, wiped,
        for the next user).
        """
        if not self._closed:
            self._check_loop()
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
            return await self._create(_CLOSED_WHILE_STARTING)
        except BaseException:
            await self._forget_one()
            raise

    async def _release(self, sandbox: DockerSandbox) -> None:
        """Take a sandbox back: wipe it and keep it, or destroy and replace it.

        The user's handle is retired first (`hand_over`), so a reference kept after
        the lease never reaches the next user. Until the wipe is over the pool's new
        handle counts as leased, so a close() meanwhile closes it too.
        """
        self._leased.discard(sandbox)
        sandbox = sandbox.hand_over()
        self._leased.add(sandbox)
        try:
            healthy = sandbox.alive and not sandbox.container_exited
            if not self._closed and healthy and sandbox.uses < self.config.max_uses:
                try:
                    await sandbox.reset()
                except SandboxError as exc:
                    if not self._closed:  # a close() meanwhile fails the wipe on purpose
                        logger.warning("sandbox %s failed its wipe: %s", sandbox.container_id, exc)
                else:
                    if not self._closed:
                        self._leased.discard(sandbox)
                        await self._add_idle(sandbox)
                        return
        finally:
            self._leased.discard(sandbox)
            if sandbox not in self._idle:  # given up: cut short (cancelled) or unusable
                try:
                    await self._close_placed(sandbox)
                finally:
                    await self._forget_one()
        if not self._closed:
            self._track(asyncio.ensure_future(self._refill()))

    # ------------------------------------------------------------------ internals

    def _require_open(self) -> None:
        if self._closed:
            raise SandboxClosedError("this pool is closed; create a new SandboxPool")
        self._check_loop()
        if not self._started:
            raise SandboxClosedError(
                "this pool was not started; use `async with SandboxPool(...)` or await start()"
            )

    def _check_loop(self) -> None:
        """Refuse use from a loop other than the pool's: its attach streams, locks and
        background tasks belong to that loop, and would fail deep in asyncio here."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            raise SandboxError(_OTHER_LOOP)

    def _track(self, task: asyncio.Future[None]) -> None:
        self._tasks.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._tasks.discard)  # type: ignore[arg-type]

    async def _create(self, closed_message: str) -> DockerSandbox:
        """Start a sandbox for the pool; if the pool closes meanwhile, remove it and
        raise SandboxClosedError with `closed_message` (not the start's own error,
        which close() removing its container causes)."""
        async with self._start_gate:
            if self._closed or self._hosts is None:
                raise SandboxClosedError(closed_message)
            hosts = self._hosts
            attempts = len(hosts.hosts)
            while True:
                host = await hosts.place()
                sandbox = DockerSandbox(
                    hosts.config_for(host), client=host.client, pool_id=self.pool_id
                )
                try:
                    await sandbox.start()
                except Exception as exc:
                    hosts.release(host.endpoint)
                    if self._closed:  # close() removed its container mid-start
                        raise SandboxClosedError(closed_message) from exc
                    attempts -= 1
                    if attempts > 0 and is_connection_failure(exc):
                        hosts.mark_down(host.endpoint, exc)  # try the next host
                        continue
                    raise
                break
        if self._closed:  # started after close() swept the pool: never keep it
            await self._close_placed(sandbox)
            raise SandboxClosedError(closed_message)
        return sandbox

    async def _close_placed(self, sandbox: DockerSandbox) -> None:
        """Destroy a sandbox and free its room on its host. One whose daemon went away
        is gone with it (the daemon removes it when it returns, or close() does)."""
        try:
            await sandbox.close()
        except Exception as exc:
            if not is_connection_failure(exc):
                raise
            if self._hosts is not None:
                self._hosts.mark_down(sandbox.config.docker_host, exc)
        finally:
            if self._hosts is not None:
                self._hosts.release(sandbox.config.docker_host)

    async def _add_idle(self, sandbox: DockerSandbox) -> None:
        """Put a ready sandbox in the pool and wake one waiting acquirer for it."""
        self._idle.append(sandbox)
        await self._notify()

    async def _forget_one(self) -> None:
        """Give up one sandbox's slot, so that a waiting acquirer may start another.

        The count drops at once: a second cancellation arriving while the wake-up
        waits for the lock must not lose the slot (a pool of one would then make
        every later acquire wait for ever).
        """
        self._count -= 1
        await self._notify()

    async def _notify(self, everyone: bool = False) -> None:
        """Wake one waiting acquirer (or all). If the caller is cancelled while it
        waits for the lock, the wake-up is still delivered, in the background."""
        try:
            async with self._changed:
                if everyone:
                    self._changed.notify_all()
                else:
                    self._changed.notify()
        except asyncio.CancelledError:
            self._track(asyncio.ensure_future(self._notify(everyone)))
            raise

    async def _refill(self) -> None:
        """Replace a destroyed sandbox so the pool stays warm."""
        async with self._changed:
            if self._closed or self._count >= self.size:
                return
            self._count += 1
        try:
            sandbox = await self._create(_CLOSED_WHILE_STARTING)
        except BaseException as exc:
            await self._forget_one()
            if isinstance(exc, Exception) and not isinstance(exc, SandboxClosedError):
                self.last_error = exc
                logger.warning("could not replace a sandbox: %s", exc)
            return
        await self._add_idle(sandbox)


def _remove_pool_containers(client: docker.DockerClient, pool_id: str) -> int:
    """Force-remove every container labelled as pool `pool_id`'s; returns how many."""
    doomed = sandbox_containers(client, f"{POOL_LABEL}={pool_id}")
    for container_id in doomed:
        remove_container(client, container_id)
    return len(doomed)
