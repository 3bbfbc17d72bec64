"""What ties an earlier run's lines to this run: settings, an inputs fingerprint, rows.

A resume must not pair lines of one run with the inputs of another (other -n/-r,
arguments, a changed dataset), so the earlier metadata is compared with this run's
settings, the inputs are fingerprinted the same way in every process (and as earlier
versions did), and each finished line is checked against the row at its index.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from vfgym.errors import ResumeMismatch
from vfgym.results.reader import METADATA_FILE, RESULTS_FILE, result_lines
from vfgym.results.records import as_json, json_default, plain_json, redact_secrets

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
    """`json_default` as earlier versions had it: sets in iteration order, default reprs
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
    earlier versions wrote for plain inputs; through `plain_json` when a dict has keys it
    cannot sort or write (a tuple, or int and text keys mixed)."""
    try:
        return json.dumps(item, default=json_default, sort_keys=True)
    except TypeError:
        return json.dumps(plain_json(item, finite=False), sort_keys=True)


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
