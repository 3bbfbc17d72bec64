"""The host side of the sandboxes under what users do: killed containers, odd settings.

Each test shows one defect that was found, against a real Docker Engine (runc).
"""

from __future__ import annotations

import asyncio
from typing import Any

import docker
import pytest
from docker.errors import NotFound

from vfgym.errors import SandboxClosedError
from vfgym.sandbox import SandboxConfig, SandboxPool
from vfgym.sandbox.gc import sandbox_containers

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


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # A string such as "false" is truthy: it silently turned networking on.
        ({"network": "false"}, "network must be True or False"),
        ({"network": 1}, "network must be True or False"),
        ({"timeout": True}, "timeout must be a positive number"),
        ({"start_timeout": True}, "start_timeout must be a positive number"),
        ({"labels": None}, "labels must be a dict"),
        ({"labels": "team=a"}, "labels must be a dict"),
        ({"labels": {"team": 1}}, "labels must map str to str"),
        ({"workspace": 5}, "workspace must be an absolute directory path"),
        ({"user": 10001}, "user must be numeric ids"),
        ({"image": 5}, "image must be an image name"),
        ({"docker_host": 5}, "docker_host must be"),
    ],
)
def test_config_refuses_odd_types_with_a_clear_error(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**changes)


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
