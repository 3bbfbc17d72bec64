"""Labels that mark every sandbox container, so leftovers can always be found.

The owner label names the host, process id and process start time of the
process that created the container, so a later process can tell a live owner
from a dead one even when the pid has been reused. It also names the creator's
pid namespace: processes in containers on the host's network share its hostname
but not its pids, and a pid from another namespace says nothing about liveness
here.
"""

from __future__ import annotations

import os
import socket
import time

LABEL = "vfgym.sandbox"
OWNER_LABEL = "vfgym.sandbox.owner"
POOL_LABEL = "vfgym.sandbox.pool"
CREATED_LABEL = "vfgym.sandbox.created"


def _start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[19].decode() if len(fields) > 19 else None


def _pid_namespace() -> str:
    """An id of this process's pid namespace ("" where there is none to read)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def owner_token(pid: int | None = None) -> str:
    """`host:pid:start:pidns` of this process (or of `pid`, in this process's namespace)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '0'}:{_pid_namespace()}"


def owner_is_alive(token: str) -> bool | None:
    """True/False for owners this process can judge; None when the owner is on another
    host or in another pid namespace (tokens without a namespace count as this one's)."""
    host, _, rest = token.partition(":")
    pid_text, _, rest = rest.partition(":")
    start, _, namespace = rest.partition(":")
    if host != socket.gethostname():
        return None
    if namespace and namespace != _pid_namespace():
        return None
    if not pid_text.isdigit() or int(pid_text) <= 0:
        return False
    pid = int(pid_text)
    current = _start_time(pid)
    if current is not None:
        return current == start  # a pid reused by another process is no owner
    # /proc says nothing: the owner is gone, or /proc hides it (hidepid) or does not
    # exist (macOS). Removing a live owner's sandboxes would break its run, so a pid
    # that exists counts as alive.
    return _pid_exists(pid)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sandbox_labels(pool_id: str, extra: dict[str, str]) -> dict[str, str]:
    """All labels for a new sandbox container."""
    return {
        **extra,
        LABEL: "1",
        OWNER_LABEL: owner_token(),
        POOL_LABEL: pool_id,
        CREATED_LABEL: str(int(time.time())),
    }
