"""The pool's lifecycle under failure and concurrency, against a real Docker Engine.

Each test shows one case: a close that is cancelled or that
races a start, an acquire made while the pool warms up, a sandbox used after its
lease, a pool closed under a running call, a pool used from a second event loop,
and a second cancellation while a slot is given up. Waits that hung before the
fixes are bounded, so a regression fails in seconds instead of stalling.
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import docker
import pytest
from docker.errors import NotFound

from vfgym.errors import SandboxClosedError
from vfgym.sandbox import SandboxError, SandboxPool
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.labels import POOL_LABEL

HANG = 10.0  # seconds; every bounded wait here takes well under one when it works


def pool_containers(client: docker.DockerClient, pool: SandboxPool) -> list[str]:
    return sandbox_containers(client, f"{POOL_LABEL}={pool.pool_id}")


async def wait_for_containers(
    client: docker.DockerClient, pool: SandboxPool, present: bool
) -> None:
    """Return once the pool has (or no longer has) a container in Docker."""
    deadline = time.monotonic() + HANG
    while bool(await asyncio.to_thread(pool_containers, client, pool)) != present:
        assert time.monotonic() < deadline, "the pool's containers never changed"
        await asyncio.sleep(0.01)


async def run_one(pool: SandboxPool, code: str = "6 * 7") -> str | None:
    async with pool.acquire() as sandbox:
        return (await sandbox.run_python(code)).value


async def test_an_acquire_made_while_the_pool_warms_up_gets_a_sandbox(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """Two tasks that each `await pool.start()` then acquire: the second start used to
    return at once, its acquire waited for a sandbox, and the warm-up put the sandbox
    in the pool without waking it, so it waited for ever."""
    pool = SandboxPool(make_config(), size=1)
    starting = asyncio.ensure_future(pool.start())
    try:
        await wait_for_containers(docker_client, pool, present=True)  # warm-up under way

        async def user() -> str | None:
            await pool.start()
            return await run_one(pool)

        assert await asyncio.wait_for(user(), HANG) == "42"
    finally:
        await starting
        await pool.close()


async def test_a_cancelled_close_still_closes_the_pool(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """`asyncio.wait_for(pool.close(), t)` timing out (or Ctrl-C) used to leave the pool
    half closed: acquirers waiting for a sandbox slept for ever, the idle container
    kept running, and a second close() returned at once without removing it."""
    pool = SandboxPool(make_config(), size=1)
    await pool.start()
    lease = pool.acquire()
    await lease.__aenter__()
    waiter = asyncio.ensure_future(run_one(pool))
    try:
        await asyncio.sleep(0.05)  # the waiter now waits for the leased sandbox
        closing = asyncio.ensure_future(pool.close())
        await asyncio.sleep(0)  # close() has begun
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        with pytest.raises(SandboxClosedError, match="closed"):
            await asyncio.wait_for(waiter, HANG)
        await pool.close()  # returns once the cancelled close has finished
        assert await asyncio.to_thread(pool_containers, docker_client, pool) == []
    finally:
        waiter.cancel()
        await lease.__aexit__(None, None, None)
        await pool.close()


async def test_closing_the_pool_while_it_starts_leaves_nothing_running(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """A close() that ran while start() was still connecting used to be undone by it:
    start then warmed up the pool anyway and returned normally, leaving a closed pool
    with running containers that nothing would remove."""
    pool = SandboxPool(make_config(), size=2)
    starting = asyncio.ensure_future(pool.start())
    await asyncio.sleep(0)  # start() is connecting to Docker
    await pool.close()
    try:
        with pytest.raises(SandboxClosedError, match="closed while it started"):
            await starting
        assert pool.idle == 0
        assert await asyncio.to_thread(pool_containers, docker_client, pool) == []
    finally:
        if not starting.done():
            starting.cancel()
        await asyncio.to_thread(pool.destroy_now)


async def test_a_sandbox_used_after_its_lease_ended_is_refused_and_reaches_no_one(
    make_config: Any,
) -> None:
    """A reference kept after `async with pool.acquire()` (a background task, a stored
    object) used to run code in the wiped sandbox the pool keeps for the next user,
    who then found the previous user's state."""
    async with SandboxPool(make_config(), size=1) as pool:
        async with pool.acquire() as stale:
            assert (await stale.run_python("1")).value == "1"
        assert not stale.alive
        with pytest.raises(SandboxClosedError, match="lease has ended"):
            await stale.run_python("secret = 'of the previous user'")
        with pytest.raises(SandboxClosedError, match="lease has ended"):
            await stale.write_file("secret.txt", "x")
        await stale.close()  # closing a stale handle must not destroy the next user's sandbox
        async with pool.acquire() as sandbox:
            assert sandbox is not stale
            assert sandbox.container_id == stale.container_id  # the same warm container ...
            result = await sandbox.run_python(
                "import os\n(globals().get('secret'), os.listdir('.'))"
            )
            assert result.value == "(None, [])"  # ... with nothing of the stale handle's


async def test_closing_the_pool_during_a_call_raises_closed_not_lost(make_config: Any) -> None:
    """The pool closed under a running call: the caller used to get a `sandbox_lost`
    result, which says the code crashed the sandbox (and a SandboxEnv tells the model
    so); the sandbox was closed by its owner, which is what the caller must hear."""
    pool = SandboxPool(make_config(), size=1)
    await pool.start()
    try:
        async with pool.acquire() as sandbox:
            call = asyncio.ensure_future(sandbox.run_python("import time\ntime.sleep(30)"))
            await asyncio.sleep(0.3)  # the call is running
            await pool.close()
            with pytest.raises(SandboxClosedError, match="closed while the call ran"):
                await asyncio.wait_for(call, HANG)
    finally:
        await pool.close()


# The attach streams of the first loop are left to the garbage collector: that loop
# was closed (by asyncio.run) with the pool open, so nothing can close them there.
# Their containers are removed all the same, which the test checks.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_pool_used_from_another_event_loop_says_so(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """A pool started under one `asyncio.run` and used under another (sync wrappers do
    this) used to fail deep in asyncio with "got Future attached to a different loop",
    and the failed release left its sandbox counted but lost."""
    pool = SandboxPool(make_config(), size=1)
    asyncio.run(pool.start())
    try:
        with pytest.raises(SandboxError, match="another event loop"):
            asyncio.run(run_one(pool))
        with pytest.raises(SandboxError, match="another event loop"):
            asyncio.run(pool.start())
        asyncio.run(pool.close())  # from a third loop: still removes every container
        assert pool_containers(docker_client, pool) == []
        with pytest.raises(SandboxClosedError, match="closed"):
            asyncio.run(run_one(pool))
    finally:
        pool.destroy_now()
        del pool
        gc.collect()  # the first loop's streams go here, under this test's warning filter


async def test_a_second_cancellation_while_a_slot_is_given_up_does_not_shrink_the_pool(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """An acquire cancelled while it starts a sandbox gives its slot back; a second
    cancellation (a timeout and a task group both cancelling) that arrived while it
    waited for the pool's lock to do so used to lose the slot: a pool of one then
    made every later acquire wait for ever.

    The test holds the pool's lock to keep the acquire waiting there.
    """
    pool = SandboxPool(make_config(), size=1)
    starting = asyncio.ensure_future(pool.start())
    await asyncio.sleep(0)  # started: the acquire below makes the pool's one sandbox
    try:
        acquiring = asyncio.ensure_future(run_one(pool))
        await wait_for_containers(docker_client, pool, present=True)
        await starting
        await pool._changed.acquire()
        try:
            acquiring.cancel()  # the start is undone: its container is removed ...
            await wait_for_containers(docker_client, pool, present=False)
            await asyncio.sleep(0.2)  # ... and the slot's release waits for the lock
            acquiring.cancel()
        finally:
            pool._changed.release()
        with pytest.raises(asyncio.CancelledError):
            await acquiring
        assert await asyncio.wait_for(run_one(pool), HANG) == "42"
    finally:
        await pool.close()


on_session_loop = pytest.mark.asyncio(loop_scope="session")


async def _wait_until_removed(client: docker.DockerClient, container_id: str) -> None:
    """Return once Docker no longer lists the container (auto-remove after its exit)."""
    while True:
        try:
            await asyncio.to_thread(client.api.inspect_container, container_id)
        except NotFound:
            return
        await asyncio.sleep(0.05)


@on_session_loop
async def test_a_pool_never_hands_out_a_sandbox_killed_while_idle(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """`docker kill` of an idle sandbox (an operator, the OOM killer of the host) must
    not make the next user's first call fail as if its own code had crashed it."""
    async with SandboxPool(make_config(), size=1) as pool:
        async with pool.acquire() as sandbox:
            killed = sandbox.container_id
            assert killed is not None
        await asyncio.to_thread(docker_client.api.kill, killed)
        await _wait_until_removed(docker_client, killed)
        await asyncio.sleep(0.1)  # let the loop read the end of the closed stream
        async with pool.acquire() as sandbox:
            assert sandbox.container_id != killed
            result = await sandbox.run_python("6 * 7")
            assert not result.sandbox_lost, result.summary()
            assert result.value == "42"


def test_pool_refuses_odd_arguments_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="start_concurrency must be a positive integer"):
        SandboxPool(size=1, start_concurrency="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be a SandboxConfig"):
        SandboxPool({"timeout": 5}, size=1)  # type: ignore[arg-type]


@on_session_loop
async def test_a_waiter_cancelled_just_after_its_wake_up_does_not_strand_the_next(
    make_config: Any,
) -> None:
    """Many rollouts waiting on a small pool, one of them cancelled (a timeout, Ctrl-C
    of part of a batch) just as a sandbox came back: the next waiter must get it.

    The test holds the pool's condition lock to force that interleaving: the release
    notifies waiter `b`, which then waits for the lock and is cancelled there.
    """
    async with SandboxPool(make_config(), size=1) as pool:
        held = pool.acquire()
        await held.__aenter__()

        async def use() -> str | None:
            async with pool.acquire() as sandbox:
                return (await sandbox.run_python("6 * 7")).value

        b, c = asyncio.ensure_future(use()), asyncio.ensure_future(use())
        await asyncio.sleep(0.05)  # both wait for a sandbox
        await pool._changed.acquire()
        release = asyncio.ensure_future(held.__aexit__(None, None, None))
        while pool.idle == 0:  # wiped and back; the release now waits for the lock
            await asyncio.sleep(0.01)
        pool._changed.release()
        await pool._changed.acquire()  # queued behind the release, which notifies b
        b.cancel()
        pool._changed.release()
        await release
        assert await asyncio.wait_for(c, 30) == "42"  # before the fix: waits for ever
        assert b.cancelled()


@on_session_loop
async def test_closing_the_pool_while_an_acquire_starts_a_sandbox_says_the_pool_closed(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """The waiting user must hear that the pool closed, not that the image is broken
    (and must not be handed a sandbox of a pool that is gone)."""
    pool = SandboxPool(make_config(), size=1)
    await pool.start()
    async with pool.acquire() as sandbox:
        killed = sandbox.container_id
    await asyncio.to_thread(docker_client.api.kill, killed)
    await _wait_until_removed(docker_client, killed)
    await asyncio.sleep(0.1)

    async def use() -> None:
        async with pool.acquire():
            pass

    waiting = asyncio.ensure_future(use())  # the idle one is dead: a new one is started
    label = f"vfgym.sandbox.pool={pool.pool_id}"
    while not await asyncio.to_thread(sandbox_containers, docker_client, label):
        await asyncio.sleep(0.01)
    await pool.close()
    with pytest.raises(SandboxClosedError, match="closed"):
        await waiting
    assert not await asyncio.to_thread(sandbox_containers, docker_client, label)


@on_session_loop
async def test_an_acquire_while_the_pool_starts_makes_no_sandbox_beyond_its_size(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    """An acquire that runs while `start()` checks the image starts a sandbox of its
    own; start must then warm up only the rest, so the pool never holds more than
    `size` containers."""
    pool = SandboxPool(make_config(), size=2)
    label = f"vfgym.sandbox.pool={pool.pool_id}"
    starting = asyncio.ensure_future(pool.start())
    await asyncio.sleep(0)  # start() has begun (and marked the pool started)
    try:
        async with pool.acquire() as sandbox:
            assert (await sandbox.run_python("1 + 1")).value == "2"
            await starting
            ids = await asyncio.to_thread(sandbox_containers, docker_client, label)
            assert len(ids) == 2, ids
    finally:
        await pool.close()
