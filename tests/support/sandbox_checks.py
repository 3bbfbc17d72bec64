"""Checks the sandbox tests share: the host is unharmed after hostile code."""

from __future__ import annotations

import docker

from vfgym.sandbox import SandboxPool
from vfgym.sandbox.gc import sandbox_containers


def assert_host_ok(client: docker.DockerClient, pool: SandboxPool) -> None:
    """The daemon still answers and the pool holds exactly its own containers."""
    assert client.ping()
    ours = sandbox_containers(client, f"vfgym.sandbox.pool={pool.pool_id}")
    assert len(ours) <= pool.size, f"the pool leaked containers: {ours}"
