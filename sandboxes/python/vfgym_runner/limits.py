"""The runner's process settings (limits, priorities, affinity), put back on reset.

Children inherit them, the next user's session and shells among them, and any
process of the sandbox's uid can change them from outside the runner; a reset
restores them or reports the sandbox dirty.
"""

from __future__ import annotations

import ctypes
import os
import resource

from vfgym_runner.processes import LIBC

#: machine: (ioprio_get, ioprio_set) system call numbers (Python wraps neither).
IOPRIO_SYSCALLS = {"x86_64": (252, 251), "aarch64": (31, 30)}
IOPRIO_WHO_PROCESS = 1


def _ioprio(new: int | None = None) -> int | None:
    """The runner's I/O priority, after setting it to `new` if given; None where the
    machine's system call numbers are unknown or the runtime lacks the calls."""
    calls = IOPRIO_SYSCALLS.get(os.uname().machine)
    if calls is None:
        return None
    if new is not None and LIBC.syscall(calls[1], IOPRIO_WHO_PROCESS, 0, new) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    value = LIBC.syscall(calls[0], IOPRIO_WHO_PROCESS, 0)
    return None if value < 0 else value


def process_settings() -> dict[str, object]:
    """The runner's settings that its children inherit, the next user's Python session
    and shells among them, and that any process of the sandbox's uid can change from
    outside (Linux checks only the uids for these, not whether the runner is
    dumpable): resource limits, priority, scheduling policy, CPU affinity and I/O
    priority."""
    limits: dict[int, str] = {}  # one name per limit (RLIMIT_OFILE is RLIMIT_NOFILE)
    for name in sorted(dir(resource)):
        if name.startswith("RLIMIT_"):
            limits.setdefault(getattr(resource, name), name)
    settings: dict[str, object] = {
        name: resource.getrlimit(number) for number, name in limits.items()
    }
    settings["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    settings["scheduling policy"] = os.sched_getscheduler(0)
    settings["CPU affinity"] = os.sched_getaffinity(0)
    settings["I/O priority"] = _ioprio()
    return settings


def _set_process_setting(name: str, value: object) -> None:
    if name.startswith("RLIMIT_"):
        resource.setrlimit(getattr(resource, name), value)  # type: ignore[arg-type]
    elif name == "nice":
        os.setpriority(os.PRIO_PROCESS, 0, value)  # type: ignore[arg-type]
    elif name == "scheduling policy":
        os.sched_setscheduler(0, value, os.sched_param(0))  # type: ignore[arg-type]
    elif name == "CPU affinity":
        os.sched_setaffinity(0, value)  # type: ignore[arg-type]
    elif name == "I/O priority":
        _ioprio(value)  # type: ignore[arg-type]


def restore_process_settings(baseline: dict[str, object]) -> list[str]:
    """Put back every setting of `process_settings` that differs from `baseline`.

    Returns what stays changed: a lowered hard limit, a raised nice value or the
    idle scheduling policy cannot be undone without privileges no process here has,
    so the reset reports the sandbox dirty and its pool replaces it."""
    try:
        for name, value in process_settings().items():
            if value != baseline[name]:
                try:
                    _set_process_setting(name, baseline[name])
                except (OSError, ValueError):
                    pass  # reported below
        current = process_settings()
    except OSError as exc:
        return [f"cannot read the runner's process settings: {exc}"]
    return [
        f"the runner's {name} was changed to {current[name]!r} (from {value!r}) by code "
        "in the sandbox and cannot be put back"
        for name, value in baseline.items()
        if current[name] != value
    ]
