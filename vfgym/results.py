"""Evaluation results on disk: one JSON line per finished rollout, plus metadata.

Lines are appended as rollouts finish, so an interrupted run keeps everything it
finished and `resume` picks up where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import time
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import IO, Any

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


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def as_json(value: Any) -> Any:
    """`value` as it reads back from disk (tuples become lists, and so on), for comparisons."""
    return json.loads(json.dumps(value, default=_json_default))


def _finite(value: float) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None


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
    """Appends result lines and keeps `metadata.json` current; a context manager."""

    def __init__(self, directory: str | Path, metadata: dict[str, Any], *, resume: bool = False):
        self.directory = Path(directory)
        self.metadata = dict(metadata)
        self.resume = resume
        self.finished: dict[int, dict[str, Any]] = {}
        self._file: IO[str] | None = None
        self._started = time.time()

    def __enter__(self) -> ResultsWriter:
        self.directory.mkdir(parents=True, exist_ok=True)
        results = self.directory / RESULTS_FILE
        if self.resume:
            self.finished = load_finished(self.directory, expect=self.metadata)
        elif results.exists() and results.stat().st_size > 0:
            raise FileExistsError(
                f"{results} already holds results; pass resume=True (--resume) to continue "
                "that run, or choose another output directory"
            )
        self._file = results.open("a" if self.resume else "w", encoding="utf-8")
        if self.resume and _ends_mid_line(results):
            self._file.write("\n")  # a killed run's cut-off line must not swallow the next one
        self.metadata.update(
            status="running",
            started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self._started)),
            versions=library_versions(),
            resumed_rollouts=len(self.finished),
        )
        self._write_metadata()
        return self

    def write(self, record: dict[str, Any]) -> None:
        assert self._file is not None, "ResultsWriter used outside its `with` block"
        self._file.write(json.dumps(record, default=_json_default, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self, status: str, summary: dict[str, Any] | None = None) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        finished = time.time()
        self.metadata.update(
            status=status,
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(finished)),
            duration_s=round(finished - self._started, 3),
            **(summary or {}),
        )
        self._write_metadata()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._file is not None:  # not closed by the caller: the run was cut short
            self.close("interrupted" if exc_type is not None else "complete")

    def _write_metadata(self) -> None:
        path = self.directory / METADATA_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.metadata, indent=2, default=_json_default) + "\n")
        os.replace(tmp, path)


def _ends_mid_line(path: Path) -> bool:
    """True when the file's last line has no newline (a write cut off by a kill)."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


#: Metadata that must match for `resume` to continue a run rather than mix two runs.
class ResumeMismatch(ValueError):
    """A run cannot be resumed: its metadata describes another run than this one."""


RESUME_KEYS = (
    "env_id",
    "env_args",
    "model",
    "sampling_args",
    "num_inputs",
    "rollouts_per_example",
    "inputs_digest",
)


def inputs_digest(rows: list[dict[str, Any]]) -> str:
    """A fingerprint of a batch's inputs, so a resume cannot pair old lines with new prompts."""
    digest = hashlib.sha256()
    for row in rows:
        item = [row.get("prompt"), row.get("answer"), row.get("task"), row.get("info")]
        digest.update(json.dumps(item, default=_json_default, sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def load_finished(
    directory: str | Path, expect: dict[str, Any] | None = None
) -> dict[int, dict[str, Any]]:
    """Result lines of rollouts that finished without error, by input index.

    With `expect`, the earlier run's metadata must describe the same run (same
    environment, arguments, model, sampling arguments and inputs), so a resume
    cannot mix two runs.
    """
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    if expect is not None and meta_path.exists():
        previous = json.loads(meta_path.read_text())
        for key in RESUME_KEYS:
            if key in expect and key in previous and previous[key] != as_json(expect[key]):
                raise ResumeMismatch(
                    f"cannot resume {directory}: it was run with {key}={previous[key]!r}, "
                    f"this run has {key}={expect[key]!r}; use another output directory"
                )
    finished: dict[int, dict[str, Any]] = {}
    path = directory / RESULTS_FILE
    if not path.exists():
        return finished
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                # The last line of a killed run may be cut off; anything else is damage.
                continue
            if not isinstance(record, dict) or "index" not in record:
                raise ValueError(f"{path}:{number} is not a vfgym result line")
            if record.get("error"):
                finished.pop(record["index"], None)
            else:
                finished[record["index"]] = record
    return finished


def read_results(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metadata and every result line of a run, for reports and tools."""
    directory = Path(directory)
    meta_path = directory / METADATA_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    path = directory / RESULTS_FILE
    records = []
    if path.exists():
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
    return meta, records
