"""File operations in the workspace for the host's `write` and `read` requests.

Code in the sandbox can plant symlinks, FIFOs and directories where the host
expects a file, and swap them while the runner looks. So every path is walked
from the workspace one directory descriptor at a time, refusing symlinks, `..`
and anything that is not a regular file, and checking that what was opened is
what was looked at.
"""

from __future__ import annotations

import base64
import errno
import os
import stat

from vfgym_runner.config import WORKSPACE
from vfgym_runner.errors import RunnerError


def open_parent(path: str, create: bool) -> tuple[int, str]:
    """Walk to the parent of `path` inside the workspace without following symlinks."""
    if path.startswith("/"):
        if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
            raise RunnerError("path", f"{path!r} is outside the workspace {WORKSPACE}")
        path = path[len(WORKSPACE) :]
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts:
        raise RunnerError("path", "the path names the workspace itself, not a file in it")
    if ".." in parts:
        raise RunnerError("path", f"{path!r} contains '..'; use a path inside the workspace")
    flags = os.O_RDONLY | os.O_DIRECTORY
    fd = os.open(WORKSPACE, flags | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                next_fd = open_no_symlink(part, flags, fd, path)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                next_fd = open_no_symlink(part, flags, fd, path)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def write_file(request: dict) -> dict:
    """Write the request's base64 `data` to `path` with `mode`; returns its size."""
    data = base64.b64decode(request["data"])
    parent, name = open_parent(request["path"], create=True)
    try:
        mode = int(request.get("mode", 0o644)) & 0o777
        fd = open_regular_file(name, os.O_WRONLY | os.O_CREAT, parent, request["path"], mode)
        try:
            os.ftruncate(fd, 0)  # only now: O_TRUNC would act before the file was checked
            os.fchmod(fd, mode)  # open() applies the mode only to a new file, less umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    finally:
        os.close(parent)
    return {"size": len(data)}


def read_file(request: dict) -> dict:
    """Read `path` whole, refusing a file over `max_bytes`; returns it in base64."""
    limit = int(request["max_bytes"])
    parent, name = open_parent(request["path"], create=False)
    try:
        fd = open_regular_file(name, os.O_RDONLY, parent, request["path"])
        try:
            info = os.fstat(fd)
            if info.st_size > limit:
                raise RunnerError(
                    "too_large",
                    f"{request['path']!r} is {info.st_size} bytes, over the read limit of "
                    f"{limit} bytes; raise SandboxConfig.max_read_bytes to read it",
                )
            chunks, total = [], 0
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise RunnerError("too_large", f"{request['path']!r} grew over the limit")
                chunks.append(chunk)
        finally:
            os.close(fd)
    finally:
        os.close(parent)
    return {"data": base64.b64encode(b"".join(chunks)).decode("ascii")}


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def open_no_symlink(name: str, flags: int, dir_fd: int, shown: str, mode: int = 0o644) -> int:
    """Open `name` in the directory `dir_fd`, refusing symlinks.

    O_NOFOLLOW alone is not enough: some runtimes (older gVisor) follow a symlink
    when opening with O_DIRECTORY. So the entry is checked with lstat before the
    open and compared with what was opened afterwards, which also catches a
    symlink swapped in between.
    """
    refusal = f"{shown!r} goes through a symlink ({name!r}); sandbox file access never follows them"
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is not None and stat.S_ISLNK(before.st_mode):
        raise RunnerError("path", refusal)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunnerError("path", refusal) from exc
        if exc.errno == errno.ENOTDIR:
            raise RunnerError("path", f"{name!r} in {shown!r} is not a directory") from exc
        raise
    try:
        opened = os.fstat(fd)
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (
            stat.S_ISLNK(now.st_mode)
            or not _same_file(now, opened)
            or (before is not None and not _same_file(before, opened))
        ):
            raise RunnerError("path", f"{shown!r} changed while it was opened; refusing it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_file(name: str, flags: int, dir_fd: int, shown: str, mode: int = 0o644) -> int:
    """`open_no_symlink` for a file whose bytes are read or written: never a FIFO, a
    socket or a directory. Opening a FIFO to write blocks until someone reads it,
    which would hang the runner, so the entry is checked first and opened
    non-blocking (a FIFO swapped in meanwhile then fails or is caught by fstat)."""
    refusal = f"{shown!r} is not a regular file"
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        before = None
    if before is not None and not (stat.S_ISREG(before.st_mode) or stat.S_ISLNK(before.st_mode)):
        raise RunnerError("path", refusal)
    try:
        fd = open_no_symlink(name, flags | os.O_NONBLOCK, dir_fd, shown, mode)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EISDIR):
            raise RunnerError("path", refusal) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunnerError("path", refusal)
    return fd
