"""No container outlives a cancelled start or a closed pool (real Docker Engine).

A container that is created but never started is never auto-removed, so one
whose id is lost on the way stays in Docker's "Created" state after the process
ends. These tests cancel a start while Docker is creating the container and
close a pool that holds a container it never learned of.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import docker
import pytest

from vfgym.sandbox import DockerSandbox, SandboxPool
from vfgym.sandbox.container import create_kwargs
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.image import default_image
from vfgym.sandbox.labels import POOL_LABEL, sandbox_labels


def created_since(client: docker.DockerClient, label: str, since: float) -> int:
    """How many containers carrying `label` Docker created since `since`."""
    events = client.events(
        since=int(since),
        until=int(time.time()) + 1,
        filters={"type": "container", "event": "create", "label": label},
        decode=True,
    )
    return sum(1 for _ in events)


async def settled(client: docker.DockerClient, label: str, since: float) -> tuple[int, list[str]]:
    """(containers created, containers left) for `label`, once a create happened and
    none is left, or after 15 s."""
    deadline = time.monotonic() + 15
    while True:
        created = await asyncio.to_thread(created_since, client, label, since)
        left = await asyncio.to_thread(sandbox_containers, client, label)
        if (created and not left) or time.monotonic() > deadline:
            return created, left
        await asyncio.sleep(0.2)


async def test_a_start_cancelled_while_docker_creates_leaves_no_container(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    pool_id = f"cancel-{uuid.uuid4().hex[:12]}"
    label = f"{POOL_LABEL}={pool_id}"
    since = time.time() - 1
    sandbox = DockerSandbox(make_config(), client=docker_client, pool_id=pool_id)
    task = asyncio.ensure_future(sandbox.start())
    await asyncio.sleep(0)  # the start now waits for Docker's create call, in a thread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    created, left = await settled(docker_client, label, since)
    assert created == 1  # the cancelled call did create its container ...
    assert left == [], "a container of a cancelled start was left behind"  # ... and removed it


async def test_pool_close_removes_its_containers_that_it_does_not_track(
    docker_client: docker.DockerClient, make_config: Any
) -> None:
    config = make_config()
    pool = SandboxPool(config, size=1)
    await pool.start()

    def make_stray(pool_id: str) -> str:
        labels = sandbox_labels(pool_id, config.labels)
        kwargs = create_kwargs(docker_client, config, default_image(), labels)
        return docker_client.api.create_container(**kwargs)["Id"]

    # As a start cut short leaves it: created, never started, unknown to the pool.
    stray = await asyncio.to_thread(make_stray, pool.pool_id)
    foreign = await asyncio.to_thread(make_stray, f"other-{uuid.uuid4().hex[:12]}")
    try:
        await pool.close()
        assert sandbox_containers(docker_client, f"{POOL_LABEL}={pool.pool_id}") == []
        assert stray not in sandbox_containers(docker_client)
        assert foreign in sandbox_containers(docker_client)  # another pool's: left alone
    finally:
        for container_id in (stray, foreign):
            try:
                docker_client.api.remove_container(container_id, force=True)
            except docker.errors.NotFound:
                pass
