"""Fixtures for the sandbox tests: a real Docker Engine, pooled sandboxes per runtime.

Without a reachable Docker Engine the tests skip and say how to start one; with
VFGYM_REQUIRE_DOCKER=1 (as CI sets) they fail instead. Every container made here
carries a per-session label, and the session ends by checking that none remain.
"""

from __future__ import annotations

import ast
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import docker
import pytest
import pytest_asyncio
from sandbox_checks import assert_host_ok

from vfgym.errors import SandboxError
from vfgym.sandbox import DockerSandbox, SandboxConfig, SandboxPool
from vfgym.sandbox.docker_client import make_client
from vfgym.sandbox.gc import sandbox_containers
from vfgym.sandbox.image import default_image, image_exists

SESSION_LABEL = "vfgym-test-session"
SESSION_ID = uuid.uuid4().hex[:12]
REQUIRE = os.environ.get("VFGYM_REQUIRE_DOCKER") == "1"
START_HINT = (
    "start one with `sudo bash sandboxes/setup-docker.sh` and build the image with "
    "`python -m vfgym.sandbox build`"
)


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (VFGYM_REQUIRE_DOCKER=1 makes this a failure)", pytrace=False)
    pytest.skip(reason if "setup-docker.sh" in reason else f"{reason}; {START_HINT}")


def sandbox_test_config(**changes: Any) -> SandboxConfig:
    """Small limits keep the hostile tests quick: less to fill, less to wipe."""
    base = SandboxConfig(
        memory="256m",
        workspace_size="32m",
        tmp_size="16m",
        shm_size="16m",
        max_file_size="16m",
        max_read_bytes="4m",
        output_limit=16 * 1024,
        pids=96,
        timeout=10,
        labels={SESSION_LABEL: SESSION_ID},
    )
    return base.replace(**changes)


@pytest.fixture(scope="session")
def make_config() -> Any:
    """`make_config(**changes)`: the tests' small-limits SandboxConfig, labelled for cleanup."""
    return sandbox_test_config


@pytest.fixture(scope="session")
def session_labels() -> dict[str, str]:
    """Labels that mark a container as this test session's (checked at the end)."""
    return {SESSION_LABEL: SESSION_ID}


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = make_client(None, timeout=60)
    except SandboxError as exc:
        _unavailable(f"no Docker Engine: {exc}")
    if not image_exists(client, default_image()):
        client.close()
        _unavailable(f"the sandbox image {default_image()} is not built")
    try:
        yield client
    finally:
        _assert_no_leftovers(client)
        client.close()


def _assert_no_leftovers(client: docker.DockerClient) -> None:
    """No container of this test session may outlive it."""
    label = f"{SESSION_LABEL}={SESSION_ID}"
    deadline = time.monotonic() + 15
    remaining = sandbox_containers(client, label)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.2)
        remaining = sandbox_containers(client, label)
    for container_id in remaining:  # clean up anyway so one failure does not leak
        try:
            client.api.remove_container(container_id, force=True)
        except docker.errors.APIError:
            pass
    assert not remaining, f"sandbox containers outlived the test session: {remaining}"


_RUNSC_STATE: dict[str, str | None] = {}


def _runsc_problem(client: docker.DockerClient) -> str | None:
    """Why gVisor cannot be tested here, or None when it can (checked once)."""
    if "result" in _RUNSC_STATE:
        return _RUNSC_STATE["result"]
    runtimes = client.info().get("Runtimes") or {}
    if "runsc" not in runtimes:
        problem = (
            "runsc (gVisor) is not registered with the Docker daemon; "
            "`sudo bash sandboxes/setup-docker.sh` installs and registers it"
        )
        if REQUIRE:
            pytest.fail(problem, pytrace=False)
    else:
        problem = None
        container = None
        try:
            container = client.containers.run(
                default_image(),
                entrypoint=["python3", "-c", "print(42)"],
                runtime="runsc",
                network_mode="none",
                detach=True,
                labels={SESSION_LABEL: SESSION_ID, "vfgym.sandbox": "1"},
            )
            outcome = container.wait(timeout=60)
            if outcome.get("StatusCode") != 0:
                problem = f"runsc is registered but cannot run a container here: {outcome}"
        except Exception as exc:  # any failure means gVisor is unusable on this machine
            problem = f"runsc is registered but cannot run a container here: {exc}"
        finally:
            if container is not None:
                container.remove(force=True)
    _RUNSC_STATE["result"] = problem
    return problem


@pytest.fixture(scope="session", params=["runc", "runsc"])
def runtime(request: pytest.FixtureRequest, docker_client: docker.DockerClient) -> str:
    if request.param == "runsc":
        problem = _runsc_problem(docker_client)
        if problem:
            pytest.skip(problem)
    return request.param


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def hostile_pool(runtime: str) -> AsyncIterator[SandboxPool]:
    """One sandbox per runtime, so each hostile test's successor is the same container
    (or a fresh replacement, if the pool had to recycle it)."""
    async with SandboxPool(sandbox_test_config(runtime=runtime), size=1) as pool:
        yield pool


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def pool(docker_client: docker.DockerClient) -> AsyncIterator[SandboxPool]:
    """A runc pool of two for the API tests."""
    async with SandboxPool(sandbox_test_config(), size=2) as pool:
        yield pool


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(pool: SandboxPool) -> AsyncIterator[DockerSandbox]:
    async with pool.acquire() as sandbox:
        yield sandbox


MARKER_CODE = """
import os
_vfgym_marker = "left by the previous user"
os.environ["VFGYM_LEAK"] = "1"
open("/workspace/marker.txt", "w").write("x")
open("/tmp/marker.txt", "w").write("x")
open("/dev/shm/marker.txt", "w").write("x")
"""

CLEAN_CHECK_CODE = r"""
import json, os
me = os.getpid()
procs = []
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) not in (1, me):
        try:
            with open(f"/proc/{name}/stat") as handle:
                procs.append(handle.read().rsplit(")", 1)[1].split()[0] + ":" + name)
        except OSError:
            pass
json.dumps({
    "marker": "_vfgym_marker" in globals(),
    "leak": os.environ.get("VFGYM_LEAK"),
    "processes": procs,
    "files": {d: sorted(os.listdir(d)) for d in ("/workspace", "/tmp", "/dev/shm")},
    "cwd": os.getcwd(),
})
"""


async def plant_markers(sandbox: DockerSandbox) -> None:
    result = await sandbox.run_python(MARKER_CODE)
    assert result.exit_code == 0, result.summary()


async def assert_clean(sandbox: DockerSandbox) -> None:
    """What a new user must see: no processes, files, variables or environment left."""
    result = await sandbox.run_python(CLEAN_CHECK_CODE)
    assert result.exit_code == 0, result.summary()
    state = json.loads(ast.literal_eval(result.value or "'null'"))
    assert state == {
        "marker": False,
        "leak": None,
        "processes": [],
        "files": {"/workspace": [], "/tmp": [], "/dev/shm": []},
        "cwd": "/workspace",
    }


@pytest_asyncio.fixture(loop_scope="session")
async def hostile(
    hostile_pool: SandboxPool, docker_client: docker.DockerClient
) -> AsyncIterator[DockerSandbox]:
    """A pooled sandbox with a previous user's traces planted; after the test the next
    user of the pool must see a clean sandbox and the host must be unaffected."""
    async with hostile_pool.acquire() as sandbox:
        await plant_markers(sandbox)
        yield sandbox
    async with hostile_pool.acquire() as successor:
        await assert_clean(successor)
        probe = await successor.run_python("6 * 7")
        assert probe.value == "42", probe.summary()
    assert_host_ok(docker_client, hostile_pool)
