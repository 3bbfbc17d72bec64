"""Processes of the sandbox: preparing a child for user code, listing and judging
the others, and reading how they ended.

The runner forks every shell command and the Python session through here, and
its cleanup finds the processes a call left behind with `other_pids`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal

from vfgym_runner.config import WORKSPACE

PR_SET_DUMPABLE = 4

#: /proc/<pid>/stat's flag of a process in its exit, and SIGKILL's bit in a signal mask.
PF_EXITING = 0x4
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)
#: Where /proc/<pid>/stat has the process's thread count, counted after the ")".
STAT_NUM_THREADS = 17

LIBC = ctypes.CDLL(None, use_errno=True)


def set_dumpable(value: bool) -> None:
    LIBC.prctl(PR_SET_DUMPABLE, 1 if value else 0, 0, 0, 0)


def ignorable_signals() -> list[signal.Signals]:
    """Every signal the runner can ignore: all but SIGKILL, SIGSTOP and SIGCHLD."""
    skip = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD}
    return [sig for sig in signal.valid_signals() if sig not in skip]


def reset_signals(for_exec: bool) -> None:
    """Give a child the signal dispositions its program expects.

    The runner ignores almost every signal (see main) and ignored signals stay
    ignored across exec, so children get the defaults back. The Python session
    keeps Python's own: SIGPIPE and SIGXFSZ ignored, so writes raise instead.
    """
    signal.set_wakeup_fd(-1)
    for sig in [*ignorable_signals(), signal.SIGCHLD]:
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    if not for_exec:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def prepare_child(
    stdout_fd: int, stderr_fd: int, keep: tuple[int, ...] = (), for_exec: bool = True
) -> None:
    """Runs in a freshly forked child before it becomes user code."""
    os.setsid()
    reset_signals(for_exec)
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    for fd in list_fds():
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.chdir(WORKSPACE)


def report_exec_failure(shell: str, exc: BaseException) -> None:
    """Tell the caller, on the command's stderr, why its shell could not start."""
    if isinstance(exc, OSError) and exc.errno == errno.E2BIG:
        reason = (
            "the command is too long to run (Linux allows 128 KiB per command line); "
            "write the script to a file in the workspace and run the file instead"
        )
    elif isinstance(exc, ValueError) and "null" in str(exc):
        reason = "the command contains a NUL character, which a command line cannot carry"
    else:
        reason = f"cannot start the shell: {exc}"
    try:
        os.write(2, f"{shell}: {reason}\n".encode())
    except OSError:
        pass


def list_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def other_pids(keep: set[int]) -> list[int]:
    """Every live process in the container except those in `keep`.

    A zombie is one whose every thread is gone. The state field alone does not say
    so: a process whose main thread exited while its other threads run shows "Z"
    too (its thread count is above one), and skipping it would let it outlive every
    cleanup while it stays out of sight.
    """
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in keep:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if not fields:
            continue
        threads = int(fields[STAT_NUM_THREADS]) if len(fields) > STAT_NUM_THREADS else 0
        if fields[0] not in (b"Z", b"X") or threads > 1:
            pids.append(pid)
    return pids


OOM_COUNTER_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")


class OomCounter:
    """The container's OOM-kill counter (cgroup v1 or v2), read twice per call.

    The counter file stays open and is read with one pread from its start, which
    makes the kernel (or gVisor's) produce it afresh: one system call instead of
    the open, stat, seek, reads and close of opening it each time, which under
    gVisor's ptrace platform cost tens of microseconds apiece. The descriptor is
    close-on-exec and above 2, so no child ever holds it.
    """

    def __init__(self) -> None:
        self.fd: int | None = None
        for path in OOM_COUNTER_FILES:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            if self._parse(fd) is not None:
                self.fd = fd
                return
            os.close(fd)

    def _parse(self, fd: int) -> int | None:
        try:
            text = os.pread(fd, 4096, 0)
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(b" ")
            if key == b"oom_kill":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    def read(self) -> int | None:
        """The count now, or None when the container has no readable counter."""
        return None if self.fd is None else self._parse(self.fd)


def exit_code_of(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def is_dying(pid: int) -> bool:
    """True when process `pid` is exiting or has a SIGKILL pending: it is gone in a
    moment, though `waitpid` cannot collect it yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/status", "rb") as handle:
            status = handle.read()
    except OSError:
        return False
    if fields[0] in (b"Z", b"X") or int(fields[6]) & PF_EXITING:
        return True
    for line in status.splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & SIGKILL_BIT:
            return True
    return False
