"""One sandbox pool over two real Docker Engines: placement, copying the image, a host
that stops mid-run and comes back, and cleanup on both.

The second engine is started by `.ci/setup-docker2` (its own data root, exec root,
pid file and socket); these tests stop it by its pid file and start it again. Without
it they skip and say how to start it; VFGYM_REQUIRE_DOCKER2=1 (as CI sets) makes
that a failure.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from vfgym.errors import DockerHostLostError, DockerUnavailableError
from vfgym.sandbox import SandboxConfig, SandboxPool
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.hosts import HostSet, hosts_from_environment, pool_endpoints
from vfgym.sandbox.image import default_image, image_exists
from vfgym.sandbox.labels import POOL_LABEL

REPO = Path(__file__).resolve().parents[2]
ROOT = Path(os.environ.get("VFGYM_DOCKER2_ROOT", Path.home() / ".cache/vfgym-ci/docker2"))
SECOND = f"unix://{ROOT / 'docker.sock'}"
FIRST = "unix:///var/run/docker.sock"
REQUIRE = os.environ.get("VFGYM_REQUIRE_DOCKER2") == "1"


def _second_client() -> docker.DockerClient | None:
    try:
        return make_client(SECOND, timeout=120)
    except DockerUnavailableError:
        return None


@pytest.fixture(scope="module")
def second_docker(docker_client: docker.DockerClient) -> Iterator[docker.DockerClient]:
    """The second Docker Engine (after the first, so both are there)."""
    client = _second_client()
    if client is None:
        reason = (
            f"no second Docker Engine at {SECOND}; start one with `sudo bash .ci/setup-docker2`"
        )
        if REQUIRE:
            pytest.fail(f"{reason} (VFGYM_REQUIRE_DOCKER2=1 makes this a failure)", pytrace=False)
        pytest.skip(reason)
    try:
        yield client
    finally:
        client.close()


def _stop_second_daemon() -> None:
    """SIGTERM the second dockerd by its pid file (it is this test suite's) and wait."""
    pid = int((ROOT / "dockerd.pid").read_text().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"the second dockerd (pid {pid}) did not stop in 60 s")


def _start_second_daemon() -> None:
    subprocess.run(["bash", str(REPO / ".ci/setup-docker2")], check=True, timeout=120)


def _pool_containers(client: docker.DockerClient, pool: SandboxPool) -> list[str]:
    return sandbox_containers(client, f"{POOL_LABEL}={pool.pool_id}")


def test_several_hosts_are_a_tuple_with_one_limit_per_host() -> None:
    config = SandboxConfig(docker_hosts=[FIRST, SECOND], host_limit=3)  # type: ignore[arg-type]
    assert config.docker_hosts == (FIRST, SECOND)
    assert pool_endpoints(config) == (FIRST, SECOND)
    assert HostSet(config, "image").config_for(HostSet(config, "image").hosts[1]).docker_host == (
        SECOND
    )
    with pytest.raises(ValueError, match="not both"):
        SandboxConfig(docker_host=FIRST, docker_hosts=(SECOND,))
    with pytest.raises(ValueError, match="twice"):
        SandboxConfig(docker_hosts=(FIRST, FIRST))
    with pytest.raises(ValueError, match="list of endpoints"):
        SandboxConfig(docker_hosts=FIRST)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="host_limit"):
        SandboxConfig(host_limit=0)


def test_the_environment_names_hosts_only_when_the_config_names_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VFGYM_DOCKER_HOSTS", f" {FIRST}, ,{SECOND} ")
    assert hosts_from_environment() == (FIRST, SECOND)
    assert pool_endpoints(SandboxConfig()) == (FIRST, SECOND)
    assert pool_endpoints(SandboxConfig(docker_host=SECOND)) == (SECOND,)
    monkeypatch.delenv("VFGYM_DOCKER_HOSTS")
    assert pool_endpoints(SandboxConfig()) == (None,)


async def test_a_pool_spreads_over_two_hosts_and_copies_the_image_there(
    docker_client: docker.DockerClient, second_docker: docker.DockerClient, make_config: Any
) -> None:
    image = default_image()
    if image_exists(second_docker, image):  # make the pool copy it from the first
        second_docker.api.remove_image(image, force=True)
    config = make_config(docker_hosts=(FIRST, SECOND), host_limit=2)
    async with SandboxPool(config, size=4) as pool:
        assert image_exists(second_docker, image)
        assert len(_pool_containers(docker_client, pool)) == 2
        assert len(_pool_containers(second_docker, pool)) == 2

        async def run(n: int) -> Any:
            async with pool.acquire() as sandbox:
                return (await sandbox.run_python(f"{n} * 2")).value

        assert await asyncio.gather(*(run(n) for n in range(8))) == [str(n * 2) for n in range(8)]
    assert _pool_containers(docker_client, pool) == []
    assert _pool_containers(second_docker, pool) == []


async def test_a_host_that_stops_fails_its_calls_as_infrastructure_and_is_used_when_back(
    docker_client: docker.DockerClient, second_docker: docker.DockerClient, make_config: Any
) -> None:
    # max_uses=1: every release makes a new sandbox, so each placement is seen.
    config = make_config(docker_hosts=(FIRST, SECOND), host_limit=2, max_uses=1)
    pool = SandboxPool(config, size=2)
    await pool.start()
    try:
        await _stop_and_restart_the_second_host(pool)
    finally:
        await pool.close()
        await asyncio.to_thread(_start_second_daemon)  # whatever happened, leave it running
    assert _pool_containers(docker_client, pool) == []
    assert _pool_containers(second_docker, pool) == []  # the daemon restarted: a new connection


async def _stop_and_restart_the_second_host(pool: SandboxPool) -> None:
    """Stop the second daemon under a call, use the first alone, then both again."""
    async with pool.acquire() as first, pool.acquire() as second:
        on_second = first if first.config.docker_host == SECOND else second
        assert {first.config.docker_host, second.config.docker_host} == {FIRST, SECOND}
        call = asyncio.ensure_future(
            on_second.run_python("import time; time.sleep(60)", timeout=90)
        )
        await asyncio.sleep(0.5)
        await asyncio.to_thread(_stop_second_daemon)
        with pytest.raises(DockerHostLostError, match="stopped answering"):
            await asyncio.wait_for(call, 60)
    # New sandboxes all go to the first host while the second is away.
    for _ in range(3):
        async with pool.acquire() as sandbox:
            assert sandbox.config.docker_host == FIRST
            assert (await sandbox.run_python("1 + 1")).value == "2"
    await asyncio.to_thread(_start_second_daemon)
    await asyncio.sleep(2.5)  # past the wait before a host that failed is asked again
    seen = set()
    for _ in range(4):
        async with pool.acquire() as one, pool.acquire() as two:
            seen |= {one.config.docker_host, two.config.docker_host}
            assert (await two.run_python("3 * 3")).value == "9"
    assert SECOND in seen
