"""What a reset empties and checks once every other process is dead: the workspace
and scratch directories, the workspace directory's own mode and attributes, and
Unix sockets and TCP connections that outlive their processes.

Whatever it cannot clear it reports as a problem, so that the host marks the
sandbox dirty and its pool replaces it.
"""

from __future__ import annotations

import errno
import os
import socket
import time

from vfgym_runner.config import WORKSPACE

#: Directories every user can write to, emptied between users. /dev/mqueue holds
#: POSIX message queues, which outlive the processes that made them (where it is
#: missing, as under gVisor, the seccomp filter keeps any from being made).
SCRATCH_DIRS = ("/tmp", "/dev/shm", "/dev/mqueue")
#: How long a reset waits for state that dies a moment after its processes (Unix
#: sockets the kernel's collector frees, TCP connections closing on loopback).
SETTLE_WAIT_S = 0.25
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
#: Present where the kernel is Linux's (runc), which lists TIME_WAIT connections in
#: TCP_TABLES; gVisor has neither this file nor such a listing.
TIME_WAIT_SYSCTL = "/proc/sys/net/ipv4/tcp_max_tw_buckets"


def restore_workspace_directory() -> list[str]:
    """Undo what user code can change on the workspace directory itself, which no wipe
    removes: its mode (it may have locked itself out) and its extended attributes
    (they would carry notes over to the next user); its times are set after the wipe
    (`settle_directory_times`). Returns problems."""
    problems = []
    try:
        os.chmod(WORKSPACE, 0o755)
    except OSError as exc:
        problems.append(f"{WORKSPACE}: {exc}")
    try:
        names = os.listxattr(WORKSPACE)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):  # no xattrs here at all
            problems.append(f"{WORKSPACE} (extended attributes): {exc}")
        names = []
    for name in names:
        try:
            os.removexattr(WORKSPACE, name)
        except OSError as exc:
            problems.append(f"{WORKSPACE} (extended attribute {name}): {exc}")
    return problems


def settle_directory_times(directories: tuple[str, ...]) -> list[str]:
    """Set the times of every wiped directory to now, whether it was used or not.

    Otherwise one the previous user wrote to carries the time of the wipe that
    emptied it and one left alone an older time, so the next user could tell which
    were used, and when. Write access is enough to set them to now. Returns problems.
    """
    problems = []
    for directory in directories:
        try:
            os.utime(directory)
        except FileNotFoundError:
            continue  # /dev/mqueue is missing under gVisor
        except OSError as exc:
            problems.append(f"{directory} (times): {exc}")
    return problems


def proc_rows(path: str) -> list[str] | None:
    """The rows of a /proc table below its header; None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().splitlines()[1:]
    except OSError:
        return None


def settle_unix_sockets() -> list[str]:
    """Let the kernel free the Unix sockets that outlived every process; returns problems.

    With every other process dead the runner holds no socket, so any socket listed is
    held only by descriptors in flight: sent with SCM_RIGHTS into a queue that is
    itself in flight (a socket sent into its own queue). Such a cycle keeps alive all
    it carries: a bound abstract name the next user cannot bind, an unlinked file that
    keeps /tmp full, a memfd's memory. Linux frees it when its collector runs, which
    closing any Unix socket starts while descriptors are in flight, so the runner
    closes one and waits a moment; gVisor never frees such cycles, and the sandbox is
    then reported dirty so that its pool replaces it.
    """
    listed = proc_rows("/proc/net/unix")
    if listed is None:
        return ["cannot list the sandbox's Unix sockets (/proc/net/unix)"]
    deadline = time.monotonic() + SETTLE_WAIT_S
    while listed and time.monotonic() < deadline:
        for end in socket.socketpair():
            end.close()
        time.sleep(0.002)
        listed = proc_rows("/proc/net/unix") or []
    if listed:
        return [
            f"{len(listed)} Unix sockets outlived their processes (held by descriptors in flight)"
        ]
    return []


def tcp_opens() -> int | None:
    """TCP connections opened in the sandbox so far (ActiveOpens + PassiveOpens of
    /proc/net/snmp); None when they cannot be read."""
    rows = [row.split() for row in proc_rows("/proc/net/snmp") or [] if row.startswith("Tcp:")]
    if len(rows) < 2:
        return None
    counters = dict(zip(rows[0][1:], rows[1][1:], strict=False))
    try:
        return int(counters["ActiveOpens"]) + int(counters["PassiveOpens"])
    except (KeyError, ValueError):
        return None


class TcpLeftovers:
    """Finds TCP connections that outlive their processes.

    A closed connection waits in TIME_WAIT for a minute, keeping its port: the next
    user's bind() of it fails (EADDRINUSE) and, under Linux, /proc/net/tcp shows the
    previous user's ports. Where Linux is the kernel the container is made with no
    TIME_WAIT buckets (see `vfgym.sandbox.container`), so none is left, and any
    connection still listed once its processes are dead makes the reset dirty. The
    listing costs milliseconds (the kernel walks its whole connection table), so it
    is read only after a use that opened connections, as the namespace's counters
    tell. gVisor ignores that setting and lists no TIME_WAIT connection, so there a
    use that opened any TCP connection cannot be proven clean.
    """

    def __init__(self) -> None:
        self.listed = os.path.exists(TIME_WAIT_SYSCTL)
        self.opens = tcp_opens()

    def check(self) -> list[str]:
        """Problems with the TCP state the next user would inherit."""
        opens, self.opens = self.opens, tcp_opens()
        if opens is None or self.opens is None:
            return ["cannot count the sandbox's TCP connections (/proc/net/snmp)"]
        if self.opens == opens:
            return []  # no connection made since the last wipe: none can be left
        if not self.listed:
            return [
                "TCP connections were made since the last wipe, and this runtime can neither "
                "list nor refuse the TIME_WAIT that keeps their ports for a minute"
            ]
        deadline = time.monotonic() + SETTLE_WAIT_S
        while True:
            rows = [row for path in TCP_TABLES for row in proc_rows(path) or []]
            if not rows or time.monotonic() > deadline:
                break
            time.sleep(0.002)  # on loopback a dying connection closes within moments
        if rows:
            return [f"{len(rows)} TCP connections outlived their processes (e.g. in TIME_WAIT)"]
        return []


DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def wipe_directory(directory: str) -> int:
    """Remove everything inside `directory` (not the directory itself); never follows links.

    It walks by descriptor, one directory open at a time and without recursion, so
    no depth of tree and no length of path that user code can make stops it. It runs
    with every other process dead, so climbing back up through ".." is safe.
    """
    try:
        fd = os.open(directory, DIRECTORY_FLAGS)
    except FileNotFoundError:
        return 0
    removed = 0
    names: list[str] = []  # the path from `directory` down to `fd`
    try:
        while True:
            subdirectory = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        subdirectory = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
                    removed += 1
            if subdirectory is not None:  # go down into it
                os.chmod(subdirectory, 0o700, dir_fd=fd)
                child = os.open(subdirectory, DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(subdirectory)
            elif names:  # empty now: go back up and remove it
                parent = os.open("..", DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                os.rmdir(names.pop(), dir_fd=fd)
                removed += 1
            else:
                return removed
    finally:
        os.close(fd)


def has_mqueue_fs() -> bool:
    """True when /dev/mqueue is an mqueue filesystem, where the wipe finds POSIX queues."""
    try:
        with open("/proc/self/mounts") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and fields[1] == "/dev/mqueue" and fields[2] == "mqueue":
                    return True
    except OSError:
        pass
    return False
