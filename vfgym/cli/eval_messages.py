"""What `vfgym eval` says when a run ends early or with failures, and how to go on.

Each message names what happened, what is kept, the likely fix when one is known,
and the exact command that continues: after Ctrl-C or SIGTERM, after rollouts that
errored (an unreachable server, a base URL without /v1), and after the disk refused
the results.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from vfgym.cli.eval_directory import holds_results, restart_command, resume_command
from vfgym.cli.eval_options import Endpoint, EvalOptions
from vfgym.errors import ResultsDiskError
from vfgym.results.jsonl import (
    RESULTS_FILE,
    load_finished,
)
from vfgym.results.summary import error_text, latest_records

_CONNECTION_ERRORS = frozenset({"APIConnectionError", "APITimeoutError", "ConnectError"})


def _is_unreachable(error: Any) -> bool:
    if not isinstance(error, Mapping):
        return False
    cause = error.get("cause") or {}
    kinds = {error.get("type"), cause.get("type") if isinstance(cause, Mapping) else None}
    return bool(kinds & _CONNECTION_ERRORS) or "Connection error" in str(error.get("message"))


#: What to do about each kind of disk trouble, by errno name.
_DISK_FIXES = {
    "ENOSPC": "free some space on its file system",
    "EDQUOT": "free some space or raise your disk quota",
    "EROFS": "make its file system writable again (it is mounted read-only)",
    "EACCES": "give yourself write permission on it",
    "EPERM": "give yourself write permission on it",
    "EFBIG": "raise the file-size limit (`ulimit -f`)",
}


def disk_message(
    exc: ResultsDiskError,
    options: EvalOptions,
    endpoint: Endpoint,
    directory: Path,
    resume: bool,
) -> str:
    """The disk refused the results: what happened, what is kept, what to do, how to go on."""
    fix = _DISK_FIXES.get(errno.errorcode.get(exc.errno or 0, ""), "fix the disk")
    head = f"the disk refused the results in {directory}: {exc}"
    if not resume and not holds_results(directory):
        return (
            f"{head}. Nothing was kept; {fix}, or choose another -o/--output-dir, and start "
            f"the run again with:\n  {restart_command(options, endpoint, directory)}"
        )
    return (
        f"{head}. {RESULTS_FILE} holds whole lines only (strict JSON lines); {fix}, then "
        f"continue the run with:\n  {resume_command(options, endpoint, directory)}"
    )


def report_stopped(
    how: str,
    code: int,
    options: EvalOptions,
    endpoint: Endpoint,
    directory: Path,
    resume: bool,
    err: IO[str],
) -> int:
    """Say what a run stopped before its end kept, and the command that goes on from
    there; `code` is returned. Ctrl-C, SIGTERM and a cancelled task all end here."""
    if not resume and not holds_results(directory):
        # Stopped before its first result (while the server started, say): there is
        # nothing to resume, and `--resume DIR` would be refused for that.
        print(
            f"\n{how} before any rollout finished; nothing is kept in {directory}. "
            f"Start the run again with:\n  {restart_command(options, endpoint, directory)}",
            file=err,
        )
        return code
    kept = len(load_finished(directory)) if (directory / RESULTS_FILE).exists() else 0
    print(
        f"\n{how}. {kept} finished rollout(s) are kept in {directory}; "
        f"continue with:\n  {resume_command(options, endpoint, directory)}",
        file=err,
    )
    return code


def errors_message(
    records: list[dict[str, Any]], endpoint: Endpoint, directory: Path, again: str
) -> str:
    """What failed, the likely fix when one is known, and the command that retries."""
    rows = latest_records(records)
    errored = [r for r in rows if r.get("error")]
    if endpoint.embedded:
        where = "vfgym's built-in server"
    else:
        where = f"the model server at {endpoint.base_url or 'the OpenAI API'}"
    if any(_is_unreachable(r["error"]) for r in errored):
        head = (
            f"{where} was unreachable: {len(errored)} of {len(rows)} rollouts failed after retries"
        )
    else:
        head = f"{len(errored)} of {len(rows)} rollouts errored"
    return (
        f"error: {head} ({error_text(errored[0]['error'])[:300]}).{_v1_hint(errored, endpoint)}"
        f" The finished rollouts are kept in {directory}; once the cause is fixed, run the "
        f"errored ones again with:\n  {again}"
    )


def _v1_hint(errored: list[dict[str, Any]], endpoint: Endpoint) -> str:
    """OpenAI-compatible servers (vLLM, SGLang, OpenAI) serve under /v1; a base URL without
    a path gets 404 for every request, which says nothing about the cause by itself."""
    if endpoint.embedded or not endpoint.base_url:
        return ""
    if urlsplit(endpoint.base_url).path.strip("/"):
        return ""
    if not any(_is_not_found(r["error"]) for r in errored):
        return ""
    fixed = endpoint.base_url.rstrip("/") + "/v1"
    return f" The server answered 404 Not Found: its API is usually under /v1, try -b {fixed}."


def _is_not_found(error: Any) -> bool:
    if not isinstance(error, Mapping):
        return False
    cause = error.get("cause")
    kinds = {error.get("type"), cause.get("type") if isinstance(cause, Mapping) else None}
    return "NotFoundError" in kinds or "Error code: 404" in str(error.get("message"))
