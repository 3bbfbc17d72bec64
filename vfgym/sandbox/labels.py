"""Labels that mark every sandbox container, so leftovers can always be found.

The owner label names the host, process id and process start time of the
process that created the container, so a later process can tell a live owner
from a dead one even when the pid has been reused.
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


def owner_token(pid: int | None = None) -> str:
    """`host:pid:start` of this process (or of `pid`)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '0'}"


def owner_is_alive(token: str) -> bool | None:
    """True/False for owners on this host; None when the owner is on another host."""
    host, _, rest = token.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return None
    if not pid_text.isdigit():
        return False
    current = _start_time(int(pid_text))
    return current is not None and current == start


def sandbox_labels(pool_id: str, extra: dict[str, str]) -> dict[str, str]:
    """All labels for a new sandbox container."""
    return {
        **extra,
        LABEL: "1",
        OWNER_LABEL: owner_token(),
        POOL_LABEL: pool_id,
        CREATED_LABEL: str(int(time.time())),
    }
