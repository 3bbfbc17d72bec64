"""Where a `vfgym eval` run writes, whether it may, and the commands that continue it.

Everything about the results directory that is decided before the rollouts start:
the default path, refusing to overwrite, checking it can be written, refusing a
resume with other settings, and the command lines (`--resume DIR`, `-o DIR`) that
every message ending a run prints.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from vfgym.cli._support import (
    EXIT_USAGE,
    CommandError,
)
from vfgym.cli.eval_options import DEFAULT_API_KEY_VAR, Endpoint, EvalOptions
from vfgym.errors import ResumeMismatch
from vfgym.results.jsonl import (
    METADATA_FILE,
    REDACTED,
    RESULTS_FILE,
    as_json,
    inputs_digest,
    load_finished,
    redact_secrets,
)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "model"


def default_output_dir(env_id: str, model: str, now: float | None = None) -> Path:
    """`outputs/<env>/<model>-<timestamp>`, made unique if two runs start in one second."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = Path("outputs") / _safe_name(env_id) / f"{_safe_name(model)}-{stamp}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def resolve_output_dir(options: EvalOptions, model: str) -> tuple[Path, bool]:
    """The results directory and whether this run resumes an earlier one."""
    if options.resume:
        if isinstance(options.resume, str):
            if options.output_dir and Path(options.output_dir) != Path(options.resume):
                raise CommandError(
                    f"--resume {options.resume} and -o {options.output_dir} name different "
                    "directories; give only --resume DIR",
                    EXIT_USAGE,
                )
            directory = Path(options.resume)
        elif options.output_dir:
            directory = Path(options.output_dir)
        else:
            raise CommandError(
                "--resume needs the directory of the run to continue: --resume DIR "
                "(or -o DIR --resume)",
                EXIT_USAGE,
            )
        if not (directory / RESULTS_FILE).exists() and not (directory / METADATA_FILE).exists():
            raise CommandError(
                f"nothing to resume in {directory}: it holds no {RESULTS_FILE} or {METADATA_FILE}"
                "; check the path, or drop --resume to start a new run",
                EXIT_USAGE,
            )
        return directory, True
    if options.output_dir:
        directory = Path(options.output_dir)
        _refuse_file_in_path(directory)
        if holds_results(directory):
            raise CommandError(
                f"{directory} already holds results; add --resume to continue that run, "
                "or choose another -o/--output-dir",
                EXIT_USAGE,
            )
        return directory, False
    directory = default_output_dir(options.env_id, model)
    _refuse_file_in_path(directory, given=False)
    return directory, False


def holds_results(directory: Path) -> bool:
    """True when `directory` has results a new run there would overwrite: the rule for
    refusing `-o DIR` without --resume, and so for which command a stopped run prints."""
    results = directory / RESULTS_FILE
    return results.is_file() and results.stat().st_size > 0


def _refuse_file_in_path(directory: Path, given: bool = True) -> None:
    """A file where the results directory (or one of its parents) should be cannot hold a
    run; said before the run starts rather than as an OS error once it has."""
    for path in (directory, *directory.parents):
        if path.is_dir():
            return
        if path.exists():
            what = (
                f"-o/--output-dir {directory}"
                if given
                else f"the default results directory {directory}"
            )
            raise CommandError(
                f"{what} cannot be a results directory: {path} is a file; choose another "
                "-o/--output-dir",
                EXIT_USAGE,
            )


def check_writable(directory: Path) -> None:
    """Create the results directory and make sure a file can be written in it, so a
    read-only or forbidden place is named before the run, not met as an OS error in it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CommandError(
            f"cannot write results to {directory}: {reason}; choose another -o/--output-dir "
            "(a directory you can write to)",
            EXIT_USAGE,
        ) from None
    for name in (RESULTS_FILE, METADATA_FILE):
        _check_run_file(directory / name)


def _check_run_file(path: Path) -> None:
    """A file of an earlier run in the directory must be one this run can use: results.jsonl
    is read on resume and appended to, metadata.json replaced whole. One left by another
    user (a run in a container, as root), or a directory in its place, would otherwise
    stop the run with an OS error once it has started."""
    if not path.exists():
        return
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if path.name == RESULTS_FILE:
            os.close(os.open(path, os.O_RDWR | os.O_APPEND))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CommandError(
            f"cannot use {path}: {reason}; fix it (its permissions, or move it aside), or "
            "choose another -o/--output-dir",
            EXIT_USAGE,
        ) from None


def resume_command(options: EvalOptions, endpoint: Endpoint, directory: Path) -> str:
    """The command line that continues this run where it stopped."""
    return _eval_command(options, endpoint, ["--resume", str(directory)])


def restart_command(options: EvalOptions, endpoint: Endpoint, directory: Path) -> str:
    """The command line that starts this run again in `directory`: for a run stopped
    before it wrote anything, which `--resume` would refuse (there is nothing to resume)."""
    return _eval_command(options, endpoint, ["-o", str(directory)])


def _eval_command(options: EvalOptions, endpoint: Endpoint, where: list[str]) -> str:
    """`vfgym eval` with this run's settings, then `where` (the results directory's flag)."""
    parts = ["vfgym", "eval", options.env_id, "-m", endpoint.model]
    if options.base_url:
        parts += ["-b", options.base_url]
    if options.api_key_var != DEFAULT_API_KEY_VAR:
        parts += ["-k", options.api_key_var]
    parts += [
        "-n",
        str(options.num_examples),
        "-r",
        str(options.rollouts_per_example),
        "-c",
        str(options.max_concurrent),
    ]
    if options.sampling_args:
        parts += ["-S", _json(options.sampling_args)]
    if options.env_args:
        parts += ["-a", _json(options.env_args)]
    return shlex.join(parts + where)


def _previous_metadata(directory: Path) -> dict[str, Any] | None:
    """The earlier run's metadata.json, or None when it has none; CommandError when unreadable."""
    path = directory / METADATA_FILE
    if not path.exists():
        return None
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = f"is not valid JSON ({exc})" if isinstance(exc, ValueError) else f"({exc})"
        raise CommandError(
            f"cannot resume {directory}: its {METADATA_FILE} {problem}. Move it aside to "
            f"resume from {RESULTS_FILE} alone, or start a new run with another -o/--output-dir",
            EXIT_USAGE,
        ) from None
    if not isinstance(previous, dict):
        raise CommandError(
            f"cannot resume {directory}: its {METADATA_FILE} is not a vfgym run's metadata "
            "(a JSON object); check the path, or start a new run with another -o/--output-dir",
            EXIT_USAGE,
        )
    return previous


def _earlier_command(
    previous: Mapping[str, Any], options: EvalOptions, endpoint: Endpoint, directory: Path
) -> str | None:
    """The command that continues the run `previous` describes, or None if it says too little."""
    try:
        earlier = replace(
            options,
            env_id=str(previous["env_id"]),
            num_examples=int(previous["num_examples"]),
            rollouts_per_example=int(previous["rollouts_per_example"]),
            sampling_args=_unredacted(
                dict(previous.get("sampling_args") or {}), options.sampling_args
            ),
            env_args=_unredacted(dict(previous.get("env_args") or {}), options.env_args),
        )
        model = str(previous["model"])
    except (KeyError, TypeError, ValueError):
        return None
    command = resume_command(earlier, replace(endpoint, model=model), directory)
    if REDACTED in command:
        command += f"\n(replace {REDACTED} with the credential the run was started with)"
    return command


def _unredacted(previous: Any, current: Any) -> Any:
    """The earlier run's arguments, as metadata.json holds them, with each credential
    written there as `<redacted>` taken back from this command line where it redacts
    to the same, so the command printed from them sends the key, not the placeholder."""
    if not isinstance(previous, dict):
        return previous
    current = current if isinstance(current, dict) else {}
    restored = {}
    for key, value in previous.items():
        mine = current.get(key)
        if key in current and redact_secrets(as_json({key: mine})) == {key: value}:
            restored[key] = mine
        else:
            restored[key] = _unredacted(value, mine)
    return restored


def check_resumable(env: Any, options: EvalOptions, endpoint: Endpoint, directory: Path) -> None:
    """Refuse, before any server starts, to resume a run that was started differently
    or over other rows (a dataset changed since): the engine would refuse it too, but
    only once the built-in server had started and announced itself.

    For other settings the message gives the command with the earlier run's, since the
    usual cause is `--resume DIR` without the -n/-r/-S/-a the run was started with.
    Other rows get the engine's own message: the same command would be refused again.
    """
    from vfgym.engine.runner import normalize_inputs  # the rows as the engine records them

    previous = _previous_metadata(directory)
    inputs = env.get_eval_inputs(options.num_examples, options.rollouts_per_example)
    rows = normalize_inputs(env, inputs)
    settings = {
        "env_id": env.env_id,
        "env_args": env.env_args,
        "model": endpoint.model,
        "sampling_args": env.merged_sampling_args(options.sampling_args or None),
        "num_inputs": len(rows),
        "rollouts_per_example": options.rollouts_per_example,
    }
    try:
        load_finished(
            directory, expect={**settings, "inputs_digest": inputs_digest(rows)}, rows=rows
        )
    except ResumeMismatch as exc:
        _refuse_other_settings(directory, settings, previous, options, endpoint)
        raise CommandError(str(exc), EXIT_USAGE) from None  # the same run, over other rows
    except ValueError as exc:  # a damaged results file
        raise CommandError(str(exc), EXIT_USAGE) from None


def _refuse_other_settings(
    directory: Path,
    settings: dict[str, Any],
    previous: dict[str, Any] | None,
    options: EvalOptions,
    endpoint: Endpoint,
) -> None:
    """Refuse a run started with other settings (CommandError), with the command that
    continues it when its metadata says enough to write one; return if they agree."""
    try:
        load_finished(directory, expect=settings)
    except ResumeMismatch as exc:
        earlier = None
        if previous is not None and _records_readable(directory):
            earlier = _earlier_command(previous, options, endpoint, directory)
        hint = f", or continue it with the settings it was started with:\n  {earlier}"
        raise CommandError(str(exc) + (hint if earlier else ""), EXIT_USAGE) from None


def _records_readable(directory: Path) -> bool:
    try:
        load_finished(directory)
    except ValueError:
        return False
    return True


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
