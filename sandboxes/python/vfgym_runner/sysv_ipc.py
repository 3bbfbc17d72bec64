"""System V IPC objects left by user code, found and removed between users.

Shared memory, semaphore sets and message queues outlive the processes that made
them, so a user could hand data to the next user of the same container through
them. Linux lists them in /proc/sysvipc; gVisor lists none, so there the ids
handed out since the last wipe are probed.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

_libc = ctypes.CDLL(None, use_errno=True)

# System V IPC (see SysvIpc).
IPC_PRIVATE, IPC_CREAT, IPC_RMID = 0, 0o1000, 0
SHM_INFO, MSG_INFO, SEM_INFO = 14, 12, 19
IPC_ID_LIMIT = 1 << 31
#: Where ids must be probed (gVisor), a use that went through more ids than this makes
#: the reset report the sandbox dirty (its pool replaces it) rather than probe them all.
IPC_PROBE_LIMIT = 1 << 16


class _ShmInfo(ctypes.Structure):
    _fields_ = [("used_ids", ctypes.c_int)] + [
        (name, ctypes.c_ulong)
        for name in ("shm_tot", "shm_rss", "shm_swp", "swap_attempts", "swap_successes")
    ]


class _MsgInfo(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_int)
        for name in ("msgpool", "msgmap", "msgmax", "msgmnb", "msgmni", "msgssz", "msgtql")
    ] + [("msgseg", ctypes.c_ushort)]


class _SemInfo(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_int)
        for name in (
            "semmap",
            "semmni",
            "semmns",
            "semmnu",
            "semmsl",
            "semopm",
            "semume",
            "semusz",
            "semvmx",
            "semaem",
        )
    ]


def _shm_in_use() -> int:
    """Pages of shared memory in the IPC namespace (every segment holds at least one)."""
    info = _ShmInfo()
    if _libc.shmctl(0, SHM_INFO, ctypes.byref(info)) < 0:
        return -1
    return int(info.shm_tot)


def _msg_in_use() -> int:
    info = _MsgInfo()
    if _libc.msgctl(0, MSG_INFO, ctypes.byref(info)) < 0:
        return -1
    return int(info.msgpool)


def _sem_in_use() -> int:
    info = _SemInfo()
    if _libc.semctl(0, 0, SEM_INFO, ctypes.byref(info)) < 0:
        return -1
    return int(info.semusz)


class SysvKind:
    """How to make, remove and count one kind of System V IPC object."""

    def __init__(
        self,
        name: str,
        label: str,
        make: Callable[[], int],
        remove: Callable[[int], int],
        in_use: Callable[[], int],
    ) -> None:
        self.name = name  # as in /proc/sysvipc
        self.label = label
        self.make = make
        self.remove = remove
        self.in_use = in_use


SYSV_KINDS = (
    SysvKind(
        "shm",
        "pages of shared memory",
        lambda: _libc.shmget(IPC_PRIVATE, 1, IPC_CREAT | 0o600),
        lambda ipc_id: _libc.shmctl(ipc_id, IPC_RMID, None),
        _shm_in_use,
    ),
    SysvKind(
        "sem",
        "semaphore sets",
        lambda: _libc.semget(IPC_PRIVATE, 1, IPC_CREAT | 0o600),
        lambda ipc_id: _libc.semctl(ipc_id, 0, IPC_RMID),
        _sem_in_use,
    ),
    SysvKind(
        "msg",
        "message queues",
        lambda: _libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600),
        lambda ipc_id: _libc.msgctl(ipc_id, IPC_RMID, None),
        _msg_in_use,
    ),
)


def listed_sysv_ids(kind: str) -> list[int] | None:
    """Ids of every object of `kind` from /proc/sysvipc; None where it does not exist
    (gVisor has none, and lists shared memory and message queues no other way)."""
    try:
        with open(f"/proc/sysvipc/{kind}") as handle:
            lines = handle.read().splitlines()[1:]
    except OSError:
        return None
    return [int(fields[1]) for fields in (line.split() for line in lines) if len(fields) > 1]


class SysvIpc:
    """Removes the System V IPC objects (shared memory, semaphore sets, message queues)
    that user code left: they outlive their processes and would carry data over.

    Linux lists them in /proc/sysvipc. gVisor does not, but it hands out ids one after
    another (never reusing one until they wrap), so every object alive now has an id
    between the last one handed out at the previous wipe (`marks`) and the id a new
    object gets now; those ids are removed one by one. The kernel's own counts then
    show whether any object is left, whatever way they were found.
    """

    def __init__(self) -> None:
        self.marks = {kind.name: -1 for kind in SYSV_KINDS}

    def wipe(self) -> list[str]:
        """Remove every object; returns problems (left over, or not checkable)."""
        problems = []
        for kind in SYSV_KINDS:
            ids = listed_sysv_ids(kind.name)
            if ids is None:
                ids = self._ids_since_mark(kind, problems)
            for ipc_id in ids:
                kind.remove(ipc_id)
            left = kind.in_use()
            if left < 0:
                problems.append(
                    f"cannot count System V {kind.label}: {os.strerror(ctypes.get_errno())}"
                )
            elif left:
                problems.append(f"{left} System V {kind.label} left after the wipe")
        return problems

    def _ids_since_mark(self, kind: SysvKind, problems: list[str]) -> range | list[int]:
        probe = kind.make()
        if probe < 0:
            problems.append(
                f"cannot probe System V {kind.label}: {os.strerror(ctypes.get_errno())}"
            )
            return []
        kind.remove(probe)
        mark, self.marks[kind.name] = self.marks[kind.name], probe
        used = (probe - mark - 1) % IPC_ID_LIMIT
        if used > IPC_PROBE_LIMIT:
            problems.append(f"{used} System V {kind.label} ids used since the last wipe")
            return []
        if probe > mark:
            return range(mark + 1, probe)
        return [*range(mark + 1, IPC_ID_LIMIT), *range(probe)]  # the ids wrapped around
