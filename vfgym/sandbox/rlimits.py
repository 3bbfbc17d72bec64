"""Why Docker refused a sandbox's resource limit, and the most its daemon would grant.

`max_open_files`, `max_file_size` (and `pids` under gVisor) become ulimits that runc
sets as the container starts. A daemon without CAP_SYS_RESOURCE cannot grant more
than its own hard limits, and none can grant more open files than the kernel's
`fs.nr_open`; Docker then answers with a raw OCI error ("error setting rlimit type
7: operation not permitted") that names neither the knob nor the limit. These
helpers turn it into an error that does. The limits are read when the error
happens, from the daemon's own process when it is local (the peer of its unix
socket), so they are the ones in force, not a guess made up front.
"""

from __future__ import annotations

import re
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from vfgym.sandbox.config import SandboxConfig

_REFUSED = re.compile(r"error setting rlimit type (\d+): operation not permitted", re.IGNORECASE)
#: The capability that lets a process raise a hard limit.
CAP_SYS_RESOURCE = 24
NR_OPEN = Path("/proc/sys/fs/nr_open")


@dataclass(frozen=True)
class Knob:
    """A config field that becomes an rlimit, as Linux numbers and names it."""

    field: str
    proc_label: str  # the line of /proc/<pid>/limits
    systemd: str  # the setting of the daemon's unit that raises it


#: Linux's rlimit numbers (the same on x86-64 and arm64) of the limits a sandbox sets.
KNOBS = {
    7: Knob("max_open_files", "Max open files", "LimitNOFILE"),
    1: Knob("max_file_size", "Max file size", "LimitFSIZE"),
    6: Knob("pids", "Max processes", "LimitNPROC"),
}


def refused_rlimit(error: str) -> Knob | None:
    """The knob whose limit Docker refused in `error`, or None for another error."""
    found = _REFUSED.search(error)
    return KNOBS.get(int(found.group(1))) if found else None


def local_daemon_pid(host: str) -> int | None:
    """The pid of the process behind a local unix socket `host`; None when the daemon is
    remote, in another pid namespace, or the socket cannot be reached."""
    url = urlparse(host)
    if url.scheme not in ("unix", "http+unix") or not url.path:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(2.0)
            conn.connect(url.path)
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid = struct.unpack("3i", creds)[0]
    return pid if pid > 0 else None


def hard_limit(pid: int, label: str) -> int | None:
    """Process `pid`'s hard limit from /proc/<pid>/limits; None if unlimited or unreadable."""
    try:
        lines = Path(f"/proc/{pid}/limits").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(label):
            fields = re.split(r"\s{2,}", line.strip())
            return int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None
    return None


def can_raise_limits(pid: int) -> bool:
    """Whether process `pid` holds CAP_SYS_RESOURCE (and so may raise hard limits)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    found = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.MULTILINE)
    return bool(found and int(found.group(1), 16) >> CAP_SYS_RESOURCE & 1)


def _nr_open() -> int | None:
    try:
        return int(NR_OPEN.read_text())
    except (OSError, ValueError):
        return None


def daemon_ceiling(knob: Knob, host: str) -> tuple[int, str] | None:
    """The most of `knob` a local daemon may grant, and what sets it; None when unknown."""
    pid = local_daemon_pid(host)
    if pid is None:
        return None
    nr_open = _nr_open() if knob.field == "max_open_files" else None
    own = None if can_raise_limits(pid) else hard_limit(pid, knob.proc_label)
    if own is not None and (nr_open is None or own < nr_open):
        return own, "own"
    return (nr_open, "kernel") if nr_open is not None else None


def rlimit_error(error: str, config: SandboxConfig, host: str) -> str | None:
    """A clear message for Docker's refusal of one of `config`'s limits, or None when
    `error` is not such a refusal."""
    knob = refused_rlimit(error)
    if knob is None:
        return None
    value = getattr(config, knob.field)
    head = (
        f"{knob.field}={value} is more than the Docker daemon at {host} may grant a "
        f"container ({knob.proc_label.lower()}, a ulimit Docker sets as the container starts)"
    )
    raise_daemon = (
        f"or raise the daemon's own hard limit ({knob.systemd}= in its systemd unit, or "
        "`ulimit -H` in the shell that starts dockerd) and restart it"
    )
    ceiling = daemon_ceiling(knob, host)
    if ceiling is None:
        return (
            f"{head}: lower {knob.field} below the daemon's limit (on the Docker host, "
            f"`grep '{knob.proc_label}' /proc/$(pidof dockerd)/limits` shows it), {raise_daemon}"
        )
    most, source = ceiling
    if source == "kernel":
        return (
            f"{head}: at most {most} here, the kernel's fs.nr_open. Use {knob.field}={most} "
            f"or less (lower {knob.field}), or raise fs.nr_open on the Docker host "
            "(`sysctl -w fs.nr_open=N`)"
        )
    return (
        f"{head}: at most {most} here, the daemon's own hard limit, which it may not raise "
        f"(it lacks CAP_SYS_RESOURCE). Use {knob.field}={most} or less (lower {knob.field}), "
        f"{raise_daemon}"
    )
