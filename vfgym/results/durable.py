"""Keeping results.jsonl strict JSON lines whatever happens to the process or the disk.

A results file is read by tools that know nothing of vfgym (`pandas.read_json(lines=True)`,
`jq`, a training pipeline), and they refuse a file with one broken line. Three things
can leave one: a kill in the middle of a write (the line is cut), a disk that refuses
the rest of a line (full, read-only, over quota), and a resume that appends after such
a cut line. This module owns the file operations that rule all three out:

- `LineAppender` writes whole lines only: when the disk refuses part of one, the file is
  cut back to its last complete line before the error is raised.
- `truncate_torn_tail` removes a cut-off last line (left by SIGKILL) before a resume
  appends, so the next line cannot be glued onto the fragment.
- `compact` rewrites the file with one line per rollout (the last attempt), atomically
  (temporary file, fsync, rename, fsync of the directory), and keeps the superseded
  attempts in a file of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

#: Superseded attempts of rollouts (an errored try that a resume ran again), one per line.
SUPERSEDED_FILE = "superseded.jsonl"

_CHUNK = 1 << 16


class LineAppender:
    """Appends whole lines to a file, and never leaves part of one behind.

    Writes go straight to the file descriptor (no buffer that could hold half a line
    and write it later, when the file was already cut back). If the disk refuses a
    write, the file is truncated to the end of the last complete line and the
    OSError is raised again for the caller to report.
    """

    def __init__(self, path: Path, *, truncate: bool) -> None:
        """Open `path` for appending (`truncate`: start it empty)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if truncate:
            flags |= os.O_TRUNC
        self.path = path
        self._fd: int | None = os.open(path, flags, 0o644)
        self.size = os.fstat(self._fd).st_size

    def append(self, line: bytes) -> None:
        """Write `line` (ending in a newline) whole, or cut the file back and raise."""
        assert self._fd is not None, "LineAppender used after close()"
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError:
            with contextlib.suppress(OSError):  # a file that cannot be cut is left as is
                os.ftruncate(self._fd, self.size)
            raise
        self.size += len(line)

    def sync(self) -> None:
        """Make the lines written so far durable (a power cut keeps them)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def truncate_torn_tail(path: Path) -> int:
    """Cut a last line that has no newline (a write killed half-way) off `path`.

    Returns the number of bytes removed (0 when the file ends with a whole line).
    """
    with path.open("r+b") as handle:
        end = handle.seek(0, os.SEEK_END)
        position = end
        while position > 0:
            start = max(0, position - _CHUNK)
            handle.seek(start)
            chunk = handle.read(position - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            position = start
        else:
            keep = 0
        if keep < end:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
        return end - keep


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle


def _index_of(raw: bytes) -> object:
    """The rollout index of a raw line, or None for a line that is not a readable record."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    index = record.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def needs_compaction(path: Path) -> bool:
    """True when `path` holds more than one line for some rollout, or a line no reader
    can take (a fragment a kill left, closed by an earlier version with a newline)."""
    seen: set[object] = set()
    for raw in _lines(path):
        if not raw.strip():
            continue
        index = _index_of(raw)
        if index is None or index in seen or not raw.endswith(b"\n"):
            return True
        seen.add(index)
    return False


def compact(path: Path) -> tuple[int, int]:
    """Rewrite `path` with one line per rollout: the last one written for each.

    Earlier lines of a rollout (attempts a resume ran again) are appended to
    `superseded.jsonl` beside it, so nothing is lost and every other reader counts
    each rollout once; lines no JSON reader takes are dropped (their rollouts were
    run again, which is why they are superseded). The new file replaces the old in
    one rename, after both are on disk, so a crash at any moment leaves either the
    old file or the new one, never a mix. Returns (lines kept, lines moved aside).
    """
    last: dict[object, int] = {}
    for number, raw in enumerate(_lines(path)):
        index = _index_of(raw)
        if index is not None and raw.endswith(b"\n"):
            last[index] = number
    keep_numbers = set(last.values())
    tmp = path.with_name(path.name + ".compact.tmp")
    moved: list[bytes] = []
    try:
        with tmp.open("wb") as out:
            for number, raw in enumerate(_lines(path)):
                if number in keep_numbers:
                    out.write(raw)
                elif raw.strip() and _index_of(raw) is not None and raw.endswith(b"\n"):
                    moved.append(raw)
            out.flush()
            os.fsync(out.fileno())
        if moved:
            with (path.parent / SUPERSEDED_FILE).open("ab") as aside:
                aside.writelines(moved)
                aside.flush()
                os.fsync(aside.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _sync_directory(path.parent)
    return len(keep_numbers), len(moved)


def _sync_directory(directory: Path) -> None:
    """fsync a directory, so a rename in it survives a power cut (where the OS allows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["SUPERSEDED_FILE", "LineAppender", "compact", "needs_compaction", "truncate_torn_tail"]
