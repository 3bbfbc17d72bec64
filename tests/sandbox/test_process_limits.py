"""The process limit holds on runc and on gVisor, whatever the code tries first.

Under runc the pids cgroup bounds the sandbox; under gVisor (runsc) the bound is
RLIMIT_NPROC, which gVisor counts per user namespace, so code that made a new user
namespace used to fork past it and take the whole sandbox down. With new user
namespaces refused by the seccomp policy, the limit holds on both: a fork loop ends
in a resource error for that call, the sandbox survives, and its neighbour in the
pool and the Docker host do not notice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import docker
import pytest
import pytest_asyncio
from sandbox_checks import assert_host_ok

from vfgym.sandbox import SandboxPool

pytestmark = pytest.mark.asyncio(loop_scope="session")

PIDS = 32
#: The runner (PID 1) and the Python session count against the limit too.
RESIDENT_PROCESSES = 2

# Tries for a new user namespace (where gVisor would count processes afresh), then
# forks children that stay alive until the limit refuses one.
FORK_LOOP_IN_NEW_USER_NAMESPACE = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
entered = libc.unshare(CLONE_NEWUSER) == 0
children = []
try:
    while len(children) < 1000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
finally:
    print(f"entered={entered} forked={len(children)}")
"""

# Every process forks for three seconds, as a fork bomb does; the copies end quietly.
RECURSIVE_FORK_BOMB = r"""
import os, time
session = os.getpid()
deadline = time.time() + 3
while time.time() < deadline:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
if os.getpid() != session:
    os._exit(0)
"""


@pytest_asyncio.fixture(loop_scope="session")
async def pair(runtime: str, make_config: Any) -> AsyncIterator[SandboxPool]:
    """Two sandboxes with a small process limit: one runs the bomb, one watches."""
    async with SandboxPool(make_config(runtime=runtime, pids=PIDS), size=2) as pool:
        yield pool


async def test_a_fork_loop_after_a_user_namespace_attempt_stops_at_the_limit(
    pair: SandboxPool,
) -> None:
    async with pair.acquire() as sandbox:
        result = await sandbox.run_python(FORK_LOOP_IN_NEW_USER_NAMESPACE, timeout=30)
        assert not result.sandbox_lost and not result.timed_out, result.summary()
        assert "entered=False" in result.stdout, result.stdout
        forked = int(result.stdout.split("forked=")[1])
        # The limit, and nothing else, stopped it: every slot but the residents' was used.
        assert PIDS - RESIDENT_PROCESSES - 2 <= forked <= PIDS - RESIDENT_PROCESSES, forked
        assert result.exit_code == 1
        assert "BlockingIOError" in result.stderr
        assert "Resource temporarily unavailable" in result.stderr
        follow = await sandbox.run_python("6 * 7")
        assert follow.value == "42", follow.summary()


async def test_a_shell_fork_bomb_inside_unshare_is_refused_before_it_starts(
    pair: SandboxPool,
) -> None:
    async with pair.acquire() as sandbox:
        result = await sandbox.run_shell(
            "unshare --user --map-root-user bash -c ':(){ :|:& };:'; echo status=$?", timeout=5
        )
        assert "status=1" in result.stdout, result.summary()
        assert "Operation not permitted" in result.stderr, result.stderr
        assert not result.sandbox_lost


async def test_a_recursive_fork_bomb_leaves_the_neighbour_and_the_host_alone(
    pair: SandboxPool, docker_client: docker.DockerClient
) -> None:
    async with pair.acquire() as bombed, pair.acquire() as neighbour:
        bomb = asyncio.create_task(bombed.run_python(RECURSIVE_FORK_BOMB, timeout=10))
        await asyncio.sleep(1.0)  # in the middle of the bomb
        started = time.monotonic()
        during = await neighbour.run_python("6 * 7", timeout=10)
        waited = time.monotonic() - started
        result = await bomb
        assert during.value == "42", during.summary()
        assert waited < 5, f"the neighbour took {waited:.1f}s to answer during the bomb"
        assert not result.timed_out, result.summary()
        if not result.sandbox_lost:  # survives (runc, and gVisor so far) or is replaced
            after = await bombed.run_python("1 + 1")
            assert after.value == "2", after.summary()
    async with pair.acquire() as successor:
        assert (await successor.run_python("6 * 7")).value == "42"
    assert_host_ok(docker_client, pair)
