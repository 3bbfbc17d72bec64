"""Reading a call's output while it runs, and the result the host gets for it.

The runner waits on the call's pipes, its own SIGCHLD wake-up pipe and (for the
Python session) the session's reply pipe at once, keeping only the head and tail
of each stream (`Capture`), so that no amount of output can stall or swell it.
It waits with poll(2), which needs one system call per wait and none to set up,
where an epoll selector costs five more per call (create, register, close): under
gVisor every system call is tens of microseconds of a warm call's few
milliseconds.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable

from vfgym_runner.capture import Capture


def pump(
    fds: dict[int, Capture],
    until: Callable[[], bool],
    deadline: float,
    wake_fd: int,
    reap: Callable[[], None],
    extra: int | None = None,
    on_extra: Callable[[], None] | None = None,
) -> bool:
    """Read output until `until()` is true or the deadline passes (returns False then).

    `reap` collects exited children after every wake-up, so that `until` sees them;
    `on_extra` is called whenever `extra` is readable."""
    poller = select.poll()
    for fd in (*fds, wake_fd, *([] if extra is None else [extra])):
        poller.register(fd, select.POLLIN)
    while True:
        reap()
        if until():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for fd, _ in poller.poll(min(remaining, 0.5) * 1000):
            if fd == wake_fd:
                drain_wakeups(wake_fd)
            elif fd == extra:
                on_extra()  # type: ignore[misc]
            else:
                read_into(fd, fds[fd], poller)


def drain_wakeups(wake_fd: int) -> None:
    """Empty the signal wake-up pipe, which only says that a child changed state."""
    try:
        while os.read(wake_fd, 4096):
            pass
    except BlockingIOError:
        pass


def read_into(fd: int, capture: Capture, poller: select.poll | None = None) -> None:
    """Feed what `fd` has ready into `capture`; stop watching it at its end."""
    try:
        for _ in range(64):
            data = os.read(fd, 65536)
            if not data:
                if poller is not None:
                    poller.unregister(fd)
                return
            capture.feed(data)
    except BlockingIOError:
        return
    except OSError:
        if poller is not None:
            poller.unregister(fd)


def drain(fds: dict[int, Capture]) -> None:
    """Feed everything left in each pipe into its capture, once the writers are gone."""
    for fd, capture in fds.items():
        try:
            while True:
                data = os.read(fd, 65536)
                if not data:
                    break
                capture.feed(data)
        except OSError:
            pass


def call_result(
    out: Capture,
    err: Capture,
    exit_code: int | None,
    timed_out: bool,
    oom_before: int | None,
    oom_after: int | None,
    started: float,
    **extra: object,
) -> dict:
    """The reply fields of a `python` or `shell` call; `oom_before` and `oom_after` are
    the container's OOM-kill counts before and after it ran, so an OOM kill during it
    can be told."""
    if oom_before is not None and oom_after is not None:
        oom_killed: bool | None = oom_after > oom_before
    else:
        oom_killed = None
    result: dict[str, object] = {
        "stdout": out.text(),
        "stderr": err.text(),
        "exit_code": exit_code,
        "timed_out": timed_out,
        "oom_killed": oom_killed,
        "truncated": out.truncated or err.truncated,
        "duration_s": time.monotonic() - started,
    }
    result.update(extra)
    return result
