"""Ways one user's code could reach the next user of a pooled sandbox, and the fixes.

Each test plays two users of a one-sandbox pool of its own (so that a failure
cannot spill into other tests): the first leaves something behind, the second
looks for it. Under runc and under runsc (gVisor).
"""

from __future__ import annotations

import ast
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from vfgym.sandbox import DockerSandbox, SandboxPathError, SandboxPool

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: `exit` (the system call that ends one thread, not the whole process) by machine.
SYS_EXIT = {"x86_64": 60, "aarch64": 93}


@pytest_asyncio.fixture(loop_scope="session")
async def own_pool(runtime: str, make_config: Any) -> AsyncIterator[SandboxPool]:
    """A one-sandbox pool for one test, so successive acquires get the same container
    unless a reset gave it up."""
    async with SandboxPool(make_config(runtime=runtime), size=1) as pool:
        yield pool


async def _value(sandbox: DockerSandbox, code: str) -> Any:
    """The trailing expression of `code`, as a Python literal."""
    result = await sandbox.run_python(code)
    assert result.exit_code == 0 and result.value is not None, result.summary()
    return ast.literal_eval(result.value)


# ---------------------------------------------------------------- hidden processes

# A child whose main thread ends with the `exit` system call while another thread
# keeps running: /proc/<pid>/stat then shows the process as a zombie ("Z"), though
# it still runs (and under gVisor its /proc/<pid>/task is gone). It writes a
# heartbeat file for as long as it lives.
HIDE_A_PROCESS = """
import ctypes, os, threading, time
pid = os.fork()
if pid == 0:
    os.setsid()
    def beat():
        while True:
            try:
                with open("/tmp/heartbeat", "w") as handle:
                    handle.write(repr(time.monotonic()))
            except OSError:
                pass
            time.sleep(0.02)
    threading.Thread(target=beat).start()
    time.sleep(0.05)
    ctypes.CDLL(None).syscall({sys_exit}, 0)
    os._exit(1)  # not reached: the main thread ended above
def state():
    return open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0]
for _ in range(200):
    if os.path.exists("/tmp/heartbeat") and state() == "Z":
        break
    time.sleep(0.01)
state()
"""

# (whether the heartbeat file is there, whether it comes back once removed): it
# comes back while the hidden process runs.
HEARTBEAT = """
import os, time
present = os.path.exists("/tmp/heartbeat")
if present:
    os.unlink("/tmp/heartbeat")
time.sleep(0.3)
(present, os.path.exists("/tmp/heartbeat"))
"""


async def test_a_process_whose_main_thread_exited_dies_with_its_call_and_reset(
    own_pool: SandboxPool,
) -> None:
    # The runner took such a process for a zombie: nothing was killed at the end of
    # the call, and the reset reported a clean sandbox while it kept running.
    sys_exit = SYS_EXIT.get(os.uname().machine)
    if sys_exit is None:
        pytest.skip(f"no `exit` system call number known for {os.uname().machine}")
    async with own_pool.acquire() as first:
        state = await _value(first, HIDE_A_PROCESS.format(sys_exit=sys_exit))
        assert state == "Z"  # how it looks in /proc
        _, beating = await _value(first, HEARTBEAT)
        assert not beating, "it outlived the call that made it"
        container = first.container_id
    async with own_pool.acquire() as second:
        assert await _value(second, HEARTBEAT) == (False, False), "it outlived the reset"
        assert second.container_id == container  # wiped in place, not replaced


# ---------------------------------------------------------------- the runner's settings

# Code of the sandbox's uid may change the resource limits, priority and CPU
# affinity of any process of that uid, the runner (PID 1) included: Linux checks
# only the uids for these, not whether the target is dumpable. The runner's
# children, the next user's Python session and shells among them, inherit them.
SETTINGS = """
import os, resource
(
    {name: resource.getrlimit(getattr(resource, name)) for name in LIMITS},
    os.getpriority(os.PRIO_PROCESS, 0),
    sorted(os.sched_getaffinity(0)),
)
"""
LIMITS = "LIMITS = ('RLIMIT_NOFILE', 'RLIMIT_FSIZE', 'RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_STACK')\n"

# Changes the runner could undo by itself: soft limits lowered, a narrower affinity.
SOFT_CHANGES = """
import os, resource
for name, soft in (("RLIMIT_NOFILE", 32), ("RLIMIT_FSIZE", 4096), ("RLIMIT_AS", 1 << 30)):
    _, hard = resource.prlimit(1, getattr(resource, name))
    resource.prlimit(1, getattr(resource, name), (soft, hard))
os.sched_setaffinity(1, {min(os.sched_getaffinity(0))})
resource.prlimit(1, resource.RLIMIT_NOFILE)[0]
"""

# Changes no process without privileges can undo: hard limits lowered, priority lowered.
HARD_CHANGES = """
import os, resource
resource.prlimit(1, resource.RLIMIT_NOFILE, (32, 32))
resource.prlimit(1, resource.RLIMIT_CPU, (3600, 3600))
os.setpriority(os.PRIO_PROCESS, 1, 19)
(resource.prlimit(1, resource.RLIMIT_NOFILE), os.getpriority(os.PRIO_PROCESS, 1))
"""


async def test_settings_forced_on_the_runner_do_not_reach_the_next_user(
    own_pool: SandboxPool,
) -> None:
    async with own_pool.acquire() as first:
        before = await _value(first, LIMITS + SETTINGS)
        assert await _value(first, SOFT_CHANGES) == 32  # the runner's limit did change
        container = first.container_id
    async with own_pool.acquire() as second:
        # Restored in place: the same container, with the settings it started with.
        assert await _value(second, LIMITS + SETTINGS) == before
        assert second.container_id == container
        assert await _value(second, HARD_CHANGES) == ((32, 32), 19)
    async with own_pool.acquire() as third:
        # Beyond repair without privileges: the pool replaced the container.
        assert await _value(third, LIMITS + SETTINGS) == before
        assert third.container_id != container


# ---------------------------------------------------------------- file API arguments


async def test_a_path_that_cannot_be_encoded_is_a_path_error(sandbox: DockerSandbox) -> None:
    # A lone surrogate (say, from JSON a model wrote) reached the runner, which failed
    # with its own traceback: a generic SandboxError instead of the caller's mistake.
    for path in ("a\ud800.txt", "dir\udbff/x"):
        with pytest.raises(SandboxPathError, match="cannot be encoded"):
            await sandbox.write_file(path, b"x")
        with pytest.raises(SandboxPathError, match="cannot be encoded"):
            await sandbox.read_file(path)
    # A name that is not UTF-8 (os.fsdecode's escapes) stays a usable file name.
    await sandbox.write_file("raw\udcff.bin", b"bytes")
    assert await sandbox.read_file("raw\udcff.bin") == b"bytes"
    assert sandbox.alive
