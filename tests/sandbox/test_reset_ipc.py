"""A pooled sandbox's reset leaves no System V IPC object and no POSIX message queue.

Shared memory, semaphores and message queues outlive the processes that made them,
so a user could hand data to the next user of the same container through them. The
tests plant them the ways model-written code would (util-linux's ipcmk, ctypes calls
with a key or IPC_PRIVATE, from the Python session and from a shell command), hand
the sandbox back to its pool, and look for them as the next user of the same
container, under runc and under runsc (gVisor), where the kernel lists them
differently. The lookup needs no listing: it asks for the exact ids and keys that
were made, and for the kernel's own counts of each kind.
"""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from vfgym.sandbox import DockerSandbox, SandboxPool

pytestmark = pytest.mark.asyncio(loop_scope="session")

KEY = 0x7F6A0D01
QUEUE = "/vfgym-left-behind"

# Runs in the Python session: keyed and private objects of each kind, a message
# waiting in a queue, and a POSIX message queue with a message in it.
PLANT_IN_SESSION = rf"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT, IPC_PRIVATE = 0o1000, 0
made = {{
    "shm": [libc.shmget({KEY}, 4096, IPC_CREAT | 0o600),
            libc.shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0o600)],
    "msg": [libc.msgget({KEY}, IPC_CREAT | 0o600),
            libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)],
    "sem": [libc.semget({KEY}, 2, IPC_CREAT | 0o600),
            libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600)],
}}
note = ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00secret", 14)
sent = libc.msgsnd(made["msg"][1], note, 6, 0)
queue = libc.mq_open(b"{QUEUE}-session", os.O_CREAT | os.O_RDWR, 0o600, None)
queue_errno = ctypes.get_errno() if queue < 0 else 0
if queue >= 0:
    libc.mq_send(queue, b"secret", 6, 0)
json.dumps({{"made": made, "sent": sent, "queue": queue >= 0, "queue_errno": queue_errno}})
"""

# Runs in a shell: ipcmk (util-linux, in the image), one object locked to mode 000,
# and a POSIX message queue made by a process other than the Python session.
PLANT_IN_SHELL = rf"""
set -e
ipcmk --shmem 8192 --mode 0000
ipcmk --queue
ipcmk --semaphore 3
python3 - <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
queue = libc.mq_open(b"{QUEUE}-shell", os.O_CREAT | os.O_RDWR, 0o600, None)
print(f"posix queue: {{queue >= 0}} {{ctypes.get_errno() if queue < 0 else 0}}")
EOF
"""

# Runs as the next user: is anything of the above still there?
LOOK = r"""
import ctypes, errno, json, os, struct
libc = ctypes.CDLL(None, use_errno=True)
IPC_STAT, SHM_INFO, MSG_INFO, SEM_INFO = 2, 14, 12, 19
planted = json.loads(PLANTED)
buf = ctypes.create_string_buffer(512)
def exists(result):  # EACCES: there, but locked (mode 000); EINVAL: no such id
    return result == 0 or ctypes.get_errno() != errno.EINVAL
alive = {
    "shm": [i for i in planted["shm"] if exists(libc.shmctl(i, IPC_STAT, buf))],
    "msg": [i for i in planted["msg"] if exists(libc.msgctl(i, IPC_STAT, buf))],
    "sem": [i for i in planted["sem"] if exists(libc.semctl(i, 0, IPC_STAT, buf))],
}
keyed = {
    "shm": libc.shmget(KEY, 0, 0) >= 0,
    "msg": libc.msgget(KEY, 0) >= 0,
    "sem": libc.semget(KEY, 0, 0) >= 0,
}
libc.shmctl(0, SHM_INFO, buf)
shm_pages = struct.unpack_from("Q", buf.raw, 8)[0]
libc.msgctl(0, MSG_INFO, buf)
msg_queues = struct.unpack_from("i", buf.raw, 0)[0]
libc.semctl(0, 0, SEM_INFO, buf)
sem_sets = struct.unpack_from("i", buf.raw, 28)[0]
queues = {}
for suffix in ("session", "shell"):
    fd = libc.mq_open(f"{QUEUE}-{suffix}".encode(), os.O_RDONLY)
    queues[suffix] = "open" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
fresh = libc.shmget(0, 4096, 0o1600)
usable = fresh >= 0 and libc.shmctl(fresh, 0, None) == 0
json.dumps({
    "alive": alive, "keyed": keyed, "usable": usable, "queues": queues,
    "counts": {"shm pages": shm_pages, "msg queues": msg_queues, "sem sets": sem_sets},
})
"""


def _gvisor(sandbox: DockerSandbox) -> bool:
    return sandbox.config.runtime.startswith("runsc")


def _value(result: Any) -> Any:
    assert result.exit_code == 0 and result.value is not None, result.summary()
    return json.loads(ast.literal_eval(result.value))


def _ipcmk_ids(stdout: str) -> dict[str, list[int]]:
    """The ids ipcmk printed ("Shared memory id: 3") by kind."""
    kinds = {"Shared memory": "shm", "Message queue": "msg", "Semaphore": "sem"}
    ids: dict[str, list[int]] = {"shm": [], "msg": [], "sem": []}
    for line in stdout.splitlines():
        label, _, number = line.partition(" id: ")
        if label in kinds:
            ids[kinds[label]].append(int(number))
    return ids


async def _plant(sandbox: DockerSandbox) -> dict[str, list[int]]:
    """Leave IPC objects and message queues behind; the ids of the SysV ones by kind."""
    session = _value(await sandbox.run_python(PLANT_IN_SESSION))
    made: dict[str, list[int]] = session["made"]
    assert all(i >= 0 for ids in made.values() for i in ids), made
    assert session["sent"] == 0, session
    shell = await sandbox.run_shell(PLANT_IN_SHELL)
    assert shell.exit_code == 0, shell.summary()
    from_shell = _ipcmk_ids(shell.stdout)
    assert all(len(ids) == 1 for ids in from_shell.values()), shell.stdout
    if not _gvisor(sandbox):  # runc always has POSIX queues, so the wipe is exercised
        assert session["queue"], session
        assert "posix queue: True 0" in shell.stdout, shell.stdout
    return {kind: made[kind] + from_shell[kind] for kind in made}


async def _look(sandbox: DockerSandbox, planted: dict[str, list[int]]) -> dict[str, Any]:
    code = f"PLANTED = {json.dumps(json.dumps(planted))}\nKEY = {KEY}\nQUEUE = {QUEUE!r}\n"
    seen: dict[str, Any] = _value(await sandbox.run_python(code + LOOK))
    return seen


def _assert_nothing_left(seen: dict[str, Any]) -> None:
    assert seen["alive"] == {"shm": [], "msg": [], "sem": []}, seen
    assert seen["keyed"] == {"shm": False, "msg": False, "sem": False}, seen
    assert seen["counts"] == {"shm pages": 0, "msg queues": 0, "sem sets": 0}, seen
    # ENOSYS: the runtime offers no POSIX queues at all, so none could be made.
    assert set(seen["queues"].values()) <= {"ENOENT", "ENOSYS"}, seen
    assert seen["usable"], seen


async def test_the_next_user_finds_no_ipc_objects(hostile_pool: SandboxPool) -> None:
    """Twice in a row on the same container, so a reset after an earlier reset counts."""
    containers: set[str | None] = set()
    for _ in range(2):
        async with hostile_pool.acquire() as sandbox:
            containers.add(sandbox.container_id)
            planted = await _plant(sandbox)
        async with hostile_pool.acquire() as successor:
            containers.add(successor.container_id)
            _assert_nothing_left(await _look(successor, planted))
    # The wipe itself removed them: the pool did not have to replace the container.
    assert len(containers) == 1, containers


async def test_objects_made_after_heavy_id_churn_are_removed(hostile_pool: SandboxPool) -> None:
    """Many objects made and removed within a use push the ids far past the previous
    reset; the ones still there at the end must go all the same."""
    churn = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
for _ in range(3000):
    libc.shmctl(libc.shmget(0, 4096, 0o1600), 0, None)
    libc.msgctl(libc.msgget(0, 0o1600), 0, None)
    libc.semctl(libc.semget(0, 1, 0o1600), 0, 0)
json.dumps({"shm": [libc.shmget(0, 4096, 0o1600)], "msg": [libc.msgget(0, 0o1600)],
            "sem": [libc.semget(0, 1, 0o1600)]})
"""
    async with hostile_pool.acquire() as sandbox:
        container = sandbox.container_id
        planted = _value(await sandbox.run_python(churn, timeout=60))
        assert all(i >= 0 for ids in planted.values() for i in ids), planted
    async with hostile_pool.acquire() as successor:
        assert successor.container_id == container
        seen = await _look(successor, planted)
    assert seen["alive"] == {"shm": [], "msg": [], "sem": []}, seen
    assert seen["counts"] == {"shm pages": 0, "msg queues": 0, "sem sets": 0}, seen


async def test_a_use_past_the_id_probe_limit_is_not_handed_on(hostile_pool: SandboxPool) -> None:
    """Where ids must be probed one by one (gVisor), a use that went through more than
    the runner's limit is not wiped id by id: the reset reports the sandbox dirty and
    the pool replaces the container. Linux lists the objects, so runc needs no limit."""
    churn = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for _ in range(70_000):  # the runner probes at most 65,536 ids per kind
    libc.msgctl(libc.msgget(0, 0o1600), 0, None)
[libc.msgget(0, 0o1600)]
"""
    async with hostile_pool.acquire() as sandbox:
        container = sandbox.container_id
        gvisor = _gvisor(sandbox)
        result = await sandbox.run_python(churn, timeout=120)
        assert result.exit_code == 0 and result.value is not None, result.summary()
        planted = {"shm": [], "msg": ast.literal_eval(result.value), "sem": []}
    async with hostile_pool.acquire() as successor:
        replaced = successor.container_id != container
        seen = await _look(successor, planted)
    assert replaced == gvisor, (replaced, gvisor)
    assert seen["alive"]["msg"] == [] and seen["counts"]["msg queues"] == 0, seen


async def test_posix_queues_work_or_are_refused_plainly(hostile_pool: SandboxPool) -> None:
    """Where the reset can list POSIX message queues (/dev/mqueue) they work within a
    use; where it cannot (gVisor without /dev/mqueue), mq_open fails with ENOSYS, so
    no queue is made that would outlive the wipe."""
    code = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def step(result):
    return result if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
fd = step(libc.mq_open(b"/vfgym-roundtrip", os.O_CREAT | os.O_RDWR, 0o600, None))
steps = [fd]
if isinstance(fd, int):
    buf = ctypes.create_string_buffer(8192)
    steps += [step(libc.mq_send(fd, b"ping", 4, 0)), step(libc.mq_receive(fd, buf, 8192, None))]
    steps.append(buf.value.decode(errors="replace"))
(os.path.isdir("/dev/mqueue"), steps)
"""
    async with hostile_pool.acquire() as sandbox:
        result = await sandbox.run_python(code)
    assert result.exit_code == 0 and result.value is not None, result.summary()
    has_mqueue_fs, steps = ast.literal_eval(result.value)
    if has_mqueue_fs:
        assert steps[1:] == [0, 4, "ping"], steps
    else:
        assert steps == ["ENOSYS"], steps
