"""Evaluation results on disk: one JSON line per finished rollout, plus metadata.

Lines are appended as rollouts finish, so an interrupted run keeps everything it
finished and `resume` picks up where it stopped.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import json
import math
import os
import platform
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from vfgym.errors import ResultsBusy, ResultsDiskError, ResumeMismatch
from vfgym.results.durable import LineAppender, compact, needs_compaction, truncate_torn_tail

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer per directory is up to the user
    fcntl = None  # type: ignore[assignment]

RESULTS_FILE = "results.jsonl"
METADATA_FILE = "metadata.json"

#: State keys every result line carries; more can be asked for with `state_columns`.
RECORD_STATE_KEYS = (
    "stop_reason",
    "is_truncated",
    "turn",
    "completion_tokens",
    "timing",
    "tools_called",
    "reward_errors",
    "error",
)


#: A default repr's memory address, which differs from process to process.
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


def _json_default(value: Any) -> Any:
    """A JSON form of `value`; the same in every process, so a resume (a new process)
    compares and fingerprints the same inputs as the run it continues."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, set | frozenset):
        return _plain(value, finite=False)  # sorted: a set's order differs per process
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays
        try:
            return value.tolist()
        except (TypeError, ValueError):
            pass
    return _ADDRESS.sub("", repr(value))


def _plain(value: Any, finite: bool) -> Any:
    """`value` as plain JSON data: dict keys as text (as JSON writes them), sets as
    sorted lists, tuples as lists, other values as `_json_default` gives them, and,
    when `finite`, NaN and infinity as None (strict JSON has no such numbers)."""
    if isinstance(value, float):
        return value if not finite or math.isfinite(value) else None
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, dict):
        return {_json_key(k): _plain(v, finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, finite) for v in value]
    if isinstance(value, set | frozenset):
        items = [_plain(v, finite) for v in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    return _plain(_json_default(value), finite)


def _json_key(key: Any) -> str:
    """A dict key as JSON writes it: text as is, numbers, booleans and None as JSON
    would (`1`, `true`, `null`); a key JSON refuses (a tuple: a board's `(row, col)`)
    as the JSON text of its value, rather than failing the whole line."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return json.dumps(_plain(key, finite=False), sort_keys=True)


def _strict(value: Any) -> Any:
    """`value` with every NaN or infinity replaced by None (JSON has no such numbers),
    and values JSON cannot hold turned into ones it can, as `_json_default` does."""
    return _plain(value, finite=True)


def json_line(record: dict[str, Any]) -> bytes:
    """One result line as UTF-8 bytes: strict JSON (NaN and infinity are written as null,
    so any JSON reader can load the file) ending in a newline.

    Text is kept as it is when it can be; text UTF-8 cannot encode (a lone surrogate
    from a model's output) is written with JSON's \\u escapes instead, which read
    back to the same string, rather than stopping the run.
    """
    try:
        text = json.dumps(record, default=_json_default, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        # NaN or infinity (ValueError), or a key JSON refuses (TypeError); a circular
        # reference is a bug of the caller's and stays an error.
        if isinstance(exc, ValueError) and "float" not in str(exc):
            raise
        text = json.dumps(_strict(record), ensure_ascii=False, allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(json.loads(text), ensure_ascii=True) + "\n").encode("ascii")


def as_json(value: Any) -> Any:
    """`value` as it reads back from disk (tuples become lists, NaN becomes None, and so on),
    for comparisons."""
    return json.loads(json.dumps(_strict(value), default=_json_default))


def _finite(value: Any) -> float | None:
    """A reward or metric as a JSON number, or None when it is not a finite number.

    numpy scalars (`np.float32`, `np.int64`) are numbers too, though not Python floats.
    """
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


#: Names of arguments, headers and query parameters whose values are credentials.
_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|access_?key|secret(_?key)?|private_?key|token|access_token|auth_token|"
    r"refresh_token|password|passwd|authorization|credentials?|cookie|bearer)($|_)"
)
REDACTED = "<redacted>"


def _is_secret_name(name: Any, in_url: bool = False) -> bool:
    key = re.sub(r"[^a-z0-9]+", "_", str(name).lower())
    return bool(_SECRET_NAME.search(key)) or (in_url and key in ("key", "sig", "signature"))


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        return text
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        name = user.split(":", 1)[0]
        netloc = f"{name}:{REDACTED}@{host}" if ":" in user else f"{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret_name(k, in_url=True) for k, _ in pairs):
            query = urlencode(
                [(k, REDACTED if _is_secret_name(k, in_url=True) else v) for k, v in pairs],
                safe="<>",
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_item(name: Any, value: Any) -> Any:
    # Credentials are text (or hold text); a number under such a name (`token_budget`)
    # is a setting, and stays comparable for resume.
    if _is_secret_name(name) and isinstance(value, str | dict | list) and value:
        return REDACTED
    return redact_secrets(value)


def redact_secrets(value: Any) -> Any:
    """`value` with credentials replaced by a placeholder, for anything written to disk.

    A run's metadata records how it was run (base URL, sampling and environment
    arguments), and those can carry an API key: `http://user:key@host/v1`, an
    `extra_headers` `Authorization`, an environment's `api_key` argument. The file
    outlives the key's secrecy (it is shared, archived, put in reports), so the key
    must never reach it. Values under a credential's name are replaced, and so are
    the password and credential query parameters of URLs.
    """
    if isinstance(value, dict):
        return {k: _redact_item(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return _redact_url(value)
    return value


def library_versions() -> dict[str, str]:
    """Versions of vfgym and the libraries whose behaviour shapes a result."""
    versions = {"python": platform.python_version()}
    for name in ("vfgym", "openai", "pydantic", "gymnasium", "docker", "datasets"):
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def make_record(
    index: int,
    row: dict[str, Any],
    completion: Any,
    state: dict[str, Any],
    reward: float,
    metrics: dict[str, float],
    state_columns: list[str] | None = None,
) -> dict[str, Any]:
    """The JSON line of one finished rollout.

    The prompt and info are the State's, as the episode was played: a
    `setup_state` may have added to the prompt the model saw, or drawn a board
    into the info.
    """
    record: dict[str, Any] = {
        "index": index,
        "example_id": row.get("example_id", index),
        "task": row.get("task", "default"),
        "prompt": state.get("prompt", row.get("prompt")),
        "completion": completion,
        "answer": row.get("answer", ""),
        "info": state.get("info", row.get("info", {})),
        "reward": _finite(reward),
        "metrics": {k: _finite(v) for k, v in metrics.items()},
    }
    for key in RECORD_STATE_KEYS:
        if key in state:
            record[key] = state[key]
    for key in state_columns or ():
        if key in state:
            record.setdefault("state", {})[key] = state[key]
    return record


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


RESUME_KEYS = (
    "env_id",
    "env_args",
    "model",
    "sampling_args",
    "num_inputs",
    "rollouts_per_example",
    "inputs_digest",
)


def digest_matches(previous: Any, rows: Sequence[dict[str, Any]]) -> bool:
    """True when `previous` (an earlier run's `inputs_digest`) fingerprints `rows`, as
    this version computes it or as an earlier one did: numpy values by their repr,
    sets in their per-process order. Those are computed only on a mismatch, so a run
    started by an earlier version still resumes instead of being refused."""
    if not isinstance(previous, str):
        return False
    if previous == _digest(rows):
        return True
    return any(previous == _digest(rows, legacy) for legacy in _LEGACY_DEFAULTS)


def _check_records_match(
    directory: Path, finished: dict[int, dict[str, Any]], rows: Sequence[dict[str, Any]]
) -> None:
    """Refuse records that are not rollouts of these inputs (ResumeMismatch).

    metadata.json, when there is one, already ties a run to its inputs; without it
    (moved aside, or never written) this is what keeps lines of a run with another
    -n/-r or dataset from being placed at the rollouts of other examples.
    """
    for index, record in finished.items():
        row = rows[index] if isinstance(index, int) and 0 <= index < len(rows) else None
        expected = None if row is None else _identity(row.get("example_id", index), row)
        found = _identity(record.get("example_id"), record)
        if expected != found and (expected is None or as_json(expected) != list(found)):
            this = "no such rollout" if expected is None else _describe(expected)
            raise ResumeMismatch(
                f"cannot resume {directory}: its {RESULTS_FILE} holds {_describe(found)} "
                f"at rollout {index!r}, where this run has {this}, so it comes "
                "from another run (other -n/-r, arguments or dataset); continue it with the "
                "settings it was started with, or use another output directory"
            )


def _identity(example_id: Any, row: dict[str, Any]) -> tuple[Any, Any, Any]:
    """What a result line records of its input row: example id, task and answer."""
    return (example_id, row.get("task", "default"), row.get("answer", ""))


def _describe(identity: tuple[Any, Any, Any]) -> str:
    """An input row as a refusal names it, so the user can tell which run a line is from."""
    example_id, task, answer = identity
    return f"example {example_id!r} (task {task!r}, answer {repr(answer)[:60]})"


def _legacy_default(value: Any, numpy_as_numbers: bool) -> Any:
    """`_json_default` as earlier versions had it: sets in iteration order, default reprs
    with their address and, before numpy values were numbers, numpy values by repr."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes) or (numpy_as_numbers and isinstance(value, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if numpy_as_numbers and hasattr(value, "tolist") and callable(value.tolist):
        try:
            return value.tolist()
        except (TypeError, ValueError):
            pass
    return repr(value)


_LEGACY_DEFAULTS = (
    lambda value: _legacy_default(value, numpy_as_numbers=True),
    lambda value: _legacy_default(value, numpy_as_numbers=False),
)


def _digest(rows: Iterable[dict[str, Any]], legacy: Callable[[Any], Any] | None = None) -> str:
    """The fingerprint of `rows`; with `legacy`, as an earlier version computed it
    (an empty string where that version could not: it failed on such inputs)."""
    digest = hashlib.sha256()
    for row in rows:
        item = [row.get("prompt"), row.get("answer"), row.get("task"), row.get("info")]
        if legacy is None:
            text = _digest_text(item)
        else:
            try:
                text = json.dumps(item, default=legacy, sort_keys=True)
            except (TypeError, ValueError):
                return ""
        digest.update(text.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _digest_text(item: Any) -> str:
    """`item` as canonical JSON text: `json.dumps` at C speed where it can, the same text
    earlier versions wrote for plain inputs; through `_plain` when a dict has keys it
    cannot sort or write (a tuple, or int and text keys mixed)."""
    try:
        return json.dumps(item, default=_json_default, sort_keys=True)
    except TypeError:
        return json.dumps(_plain(item, finite=False), sort_keys=True)


def inputs_digest(rows: Sequence[dict[str, Any]]) -> str:
    """A fingerprint of a batch's inputs, so a resume cannot pair old lines with new prompts.

    It is the same in every process (sets are sorted, memory addresses left out),
    since a resume is a new process.
    """
    return _digest(rows)


def load_finished(
    directory: str | Path,
    expect: dict[str, Any] | None = None,
    rows: Sequence[dict[str, Any]] | None = None,
) -> dict[int, dict[str, Any]]:
    """Result lines of rollouts that finished without error, by input index.

    With `expect`, the earlier run's metadata must describe the same run (same
    environment, arguments, model, sampling arguments and inputs), so a resume
    cannot mix two runs. With `rows`, this run's inputs: an inputs fingerprint an
    earlier version wrote is recognised, and each finished line must be a rollout
    of the row at its index (which is all that ties lines to inputs when
    metadata.json was moved aside).
    """
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    if expect is not None and meta_path.exists():
        previous = json.loads(meta_path.read_text(encoding="utf-8"))
        for key in RESUME_KEYS:
            if key not in expect or key not in previous:
                continue
            if key == "inputs_digest" and rows is not None and digest_matches(previous[key], rows):
                continue
            # Compared as written: the file holds credentials redacted, NaN as null.
            before = redact_secrets(previous[key])
            now = redact_secrets(as_json(expect[key]))
            if before != now:
                raise ResumeMismatch(
                    f"cannot resume {directory}: it was run with {key}={before!r}, "
                    f"this run has {key}={now!r}; use another output directory"
                )
    finished: dict[int, dict[str, Any]] = {}
    path = directory / RESULTS_FILE
    if not path.exists():
        return finished
    for number, record in result_lines(path):
        if record is None:  # cut off by a kill: that rollout is run again
            continue
        if not isinstance(record, dict) or "index" not in record:
            raise ValueError(f"{path}:{number} is not a vfgym result line")
        if record.get("error"):
            finished.pop(record["index"], None)
        else:
            finished[record["index"]] = record
    if rows is not None:
        _check_records_match(directory, finished, rows)
    return finished


def read_results(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metadata and every result line of a run, for reports and tools."""
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    path = directory / RESULTS_FILE
    records = []
    if path.exists():
        records = [record for _, record in result_lines(path) if record is not None]
    return meta, records


def result_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed line) for each non-blank line; None for a line the JSON
    parser refuses, such as the last line of a run killed mid-write.

    Lines are decoded one by one: a kill can cut a line inside a multi-byte
    character, and that must cost the one line, not make the whole file unreadable.
    Any refusal counts so (not UTF-8, not JSON, an integer past Python's digit limit,
    nesting past its recursion limit): a hand-edited line must not crash a resume.
    A byte-order mark opening the file (an editor that saved it as "UTF-8 with BOM")
    is not part of the first line.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError too
                yield number, None
