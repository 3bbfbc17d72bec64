"""Writing a run's results: one JSON line per finished rollout, plus metadata.

Lines are appended as rollouts finish, so an interrupted run keeps everything it
finished and `resume` picks up where it stopped. The writer holds the directory's
lock and keeps the file strict JSON lines (see `durable`); the line's JSON form is
`records`', reading back is `reader`'s, the resume checks are `resume`'s. Their
public names are importable from here too, where they have always been.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vfgym.errors import ResultsBusy, ResultsDiskError
from vfgym.results.durable import LineAppender, compact, needs_compaction, truncate_torn_tail
from vfgym.results.reader import METADATA_FILE, RESULTS_FILE, read_results, result_lines
from vfgym.results.records import (
    RECORD_STATE_KEYS,
    REDACTED,
    _strict,
    as_json,
    json_line,
    library_versions,
    make_record,
    redact_secrets,
)
from vfgym.results.resume import RESUME_KEYS, digest_matches, inputs_digest, load_finished

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer per directory is up to the user
    fcntl = None  # type: ignore[assignment]


class ResultsWriter:
    """Appends result lines and keeps `metadata.json` current; a context manager.

    It holds an exclusive lock on the directory while open: two writers would
    truncate each other's file or interleave their lines, and two resumes of one
    run would redo the same rollouts twice.

    The file is strict JSON lines whenever the writer is not in the middle of a
    write (see `vfgym.results.durable`): a resume first cuts off a line a kill left
    half-written, a write the disk refuses is cut back to the last whole line and
    raised as `ResultsDiskError`, and closing the writer compacts the file to one
    line per rollout, moving superseded attempts to `superseded.jsonl`.
    """

    def __init__(
        self,
        directory: str | Path,
        metadata: dict[str, Any],
        *,
        resume: bool = False,
        rows: Sequence[dict[str, Any]] | None = None,
    ):
        """`rows` are the run's inputs, one per rollout: a resume checks the finished
        lines against them (see `load_finished`)."""
        self.directory = Path(directory)
        self.metadata = dict(metadata)
        self.resume = resume
        self.rows = rows
        self.finished: dict[int, dict[str, Any]] = {}
        self._file: LineAppender | None = None
        self._lock: int | None = None
        self._started = time.time()
        self._written: set[Any] = set()
        self._compact = False
        self._failure: ResultsDiskError | None = None

    def __enter__(self) -> ResultsWriter:
        try:
            _make_directory(self.directory)
            self._lock = _lock_directory(self.directory)
            self._open()
        except BaseException as exc:
            self._unlock()
            if self._file is not None:
                self._file.close()
                self._file = None
            if isinstance(exc, OSError) and not isinstance(exc, ResultsDiskError):
                if _is_disk_trouble(exc):
                    raise self._disk_error(exc, "open") from exc
            raise
        return self

    def _open(self) -> None:
        results = self.directory / RESULTS_FILE
        if self.resume:
            if results.exists():
                # A killed run's cut-off line: removed, not closed with a newline, so the
                # file stays strict JSON lines and the next line starts a line of its own.
                truncate_torn_tail(results)
            self.finished = load_finished(self.directory, expect=self.metadata, rows=self.rows)
            self._compact = results.exists() and needs_compaction(results)
        elif results.exists() and results.stat().st_size > 0:
            raise FileExistsError(
                f"{results} already holds results; pass resume=True (--resume) to continue "
                "that run, or choose another output directory"
            )
        if self.resume and results.exists():
            self._written = {index for _, index in _line_indices(results)}
        self._file = LineAppender(results, truncate=not self.resume)
        self.metadata.update(
            status="running",
            started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self._started)),
            versions=library_versions(),
            resumed_rollouts=len(self.finished),
        )
        self._write_metadata()

    @property
    def kept(self) -> int:
        """Rollouts with a line on disk now: finished before this session or written in it."""
        return len(self._written)

    def write(self, record: dict[str, Any]) -> None:
        """Append one result line; ResultsDiskError (the file cut back to its last whole
        line) when the disk refuses it, and for every write after that."""
        assert self._file is not None, "ResultsWriter used outside its `with` block"
        if self._failure is not None:
            raise self._failure
        try:
            self._file.append(json_line(record))
        except OSError as exc:
            self._failure = self._disk_error(exc, "write")
            raise self._failure from exc
        index = record.get("index")
        if index in self._written:
            self._compact = True  # a retried rollout: its earlier line is superseded
        self._written.add(index)

    def _disk_error(self, exc: OSError, action: str) -> ResultsDiskError:
        """`exc` (the OS refusing a file of this run) as the error the user is shown."""
        reason = exc.strerror or str(exc)
        code = errno.errorcode.get(exc.errno or 0, "")
        where = exc.filename or self.directory / RESULTS_FILE
        return ResultsDiskError(
            f"cannot {action} {where}: {reason}{f' ({code})' if code else ''}; "
            f"{self.kept} finished rollout(s) are kept in {self.directory / RESULTS_FILE}",
            directory=str(self.directory),
            kept=self.kept,
            error_number=exc.errno,
        )

    def close(self, status: str, summary: dict[str, Any] | None = None) -> None:
        """Close the file (compacted to one line per rollout when it holds superseded
        attempts) and write the final metadata with `status` and `summary`."""
        try:
            if self._file is not None:
                self._file.close()
                self._file = None
                if self._compact and self._failure is None:
                    try:
                        compact(self.directory / RESULTS_FILE)
                    except OSError as exc:
                        raise self._disk_error(exc, "compact") from exc
                    self._compact = False
            finished = time.time()
            self.metadata.update(
                status=status,
                finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(finished)),
                duration_s=round(finished - self._started, 3),
                **(summary or {}),
            )
            self._write_metadata()
        finally:
            self._unlock()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self._file is not None:  # not closed by the caller: the run was cut short
                status = "complete" if exc_type is None else "interrupted"
                if self._failure is not None:
                    status = "failed"  # the disk refused a line
                try:
                    self.close(status)
                except OSError:
                    # The disk that stopped the run refuses the metadata too: the error
                    # already on its way says what happened, and is not replaced by this.
                    if exc_type is None:
                        raise
        finally:
            self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases its lock
            self._lock = None

    def _write_metadata(self) -> None:
        path = self.directory / METADATA_FILE
        tmp = path.with_suffix(".json.tmp")
        safe = redact_secrets(_strict(self.metadata))
        try:
            tmp.write_text(json.dumps(safe, indent=2, allow_nan=False) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if not _is_disk_trouble(exc):
                raise
            raise self._disk_error(exc, "write") from exc


#: What the OS says when the disk, not vfgym, is at fault: full, read-only, forbidden,
#: over quota, past the file-size limit, or failing.
_DISK_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EROFS", "EACCES", "EPERM", "EDQUOT", "EFBIG", "EIO")
    if hasattr(errno, name)
)


def _is_disk_trouble(exc: OSError) -> bool:
    return exc.errno in _DISK_ERRNOS


def _line_indices(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, rollout index) of each readable result line of `path`."""
    for number, record in result_lines(path):
        if isinstance(record, dict) and "index" in record:
            yield number, record["index"]


def _make_directory(directory: Path) -> None:
    """Create the results directory; a file in its place (or its parent's) is named as
    such, since `FileExistsError: File exists` reads as "pass resume=True"."""
    for path in (directory, *directory.parents):
        if path.is_dir():
            break
        if path.exists():
            raise NotADirectoryError(
                f"results_path {directory} cannot be a results directory: {path} is a file; "
                "give the path of a directory (it is created if missing)"
            )
    directory.mkdir(parents=True, exist_ok=True)


def _lock_directory(directory: Path) -> int | None:
    """An exclusive lock on `directory` (its open descriptor), or ResultsBusy when another
    writer holds it; None where the platform has no advisory locks."""
    if fcntl is None:
        return None
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ResultsBusy(
            f"another run is writing to {directory} right now (a second `vfgym eval` or batch "
            "with the same output directory); wait for it to finish, or choose another output "
            "directory"
        ) from None
    except OSError:  # a file system without locks: go on unlocked, as before
        os.close(fd)
        return None
    return fd


__all__ = [
    "METADATA_FILE",
    "RECORD_STATE_KEYS",
    "REDACTED",
    "RESULTS_FILE",
    "RESUME_KEYS",
    "ResultsWriter",
    "as_json",
    "digest_matches",
    "inputs_digest",
    "json_line",
    "library_versions",
    "load_finished",
    "make_record",
    "read_results",
    "redact_secrets",
    "result_lines",
]
