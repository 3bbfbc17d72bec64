"""`vfgym eval`: evaluate a model on an environment and print the summary.

With no model server configured (no base URL, no API key), the environment's own
reference policy is served by vfgym's OpenAI-compatible server on loopback, so a
first evaluation needs nothing but the install, and still runs the whole pipeline:
openai client, HTTP, rollouts, sandboxes, rubric and results on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from vfgym.cli._support import (
    EXIT_DISK,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    CommandError,
    SigtermCancels,
    Terminated,
    build_environment,
    check_docker,
    check_served_model,
    describe_environment,
)
from vfgym.engine._async import boxed
from vfgym.errors import ResultsBusy, ResultsDiskError, ResumeMismatch
from vfgym.results.jsonl import (
    METADATA_FILE,
    REDACTED,
    RESULTS_FILE,
    as_json,
    inputs_digest,
    load_finished,
    read_results,
    redact_secrets,
)
from vfgym.results.summary import error_text, format_summary, latest_records, summarize_records

DEFAULT_API_KEY_VAR = "OPENAI_API_KEY"
EMBEDDED_MODELS = ("reference", "random")
#: The most rollouts one run takes on: every one is an input row built before the first
#: starts (about half a kilobyte each, before its conversation; ten million is some 5 GB),
#: so far more would run the machine out of memory and have the process killed with
#: nothing said. Larger evaluations are split into several runs.
MAX_ROLLOUTS = 10_000_000
_CONNECTION_ERRORS = frozenset({"APIConnectionError", "APITimeoutError", "ConnectError"})


@dataclass
class EvalOptions:
    """What `vfgym eval` was asked to do, as parsed from the command line."""

    env_id: str
    model: str | None = None
    base_url: str | None = None
    api_key_var: str = DEFAULT_API_KEY_VAR
    num_examples: int = 5
    rollouts_per_example: int = 3
    max_concurrent: int = 32
    sampling_args: dict[str, Any] = field(default_factory=dict)
    env_args: dict[str, Any] = field(default_factory=dict)
    output_dir: str | None = None
    resume: str | bool = False
    progress: bool = False
    verbose: bool = False


@dataclass(frozen=True)
class Endpoint:
    """Where the model lives: vfgym's built-in server, or a configured one."""

    embedded: bool
    model: str
    base_url: str | None = None
    api_key: str | None = None


def resolve_endpoint(options: EvalOptions, environ: Mapping[str, str]) -> Endpoint:
    """Decide between the embedded reference server and a configured model server.

    The built-in server is used when no base URL is configured and either no API
    key is set or the model asked for is one it plays (`reference`, `random`), so
    a key exported for other tools never hides the reference policy.
    """
    api_key = environ.get(options.api_key_var) or None
    base_url = options.base_url or environ.get("OPENAI_BASE_URL") or None
    if base_url is not None:
        check_base_url(base_url, "-b/--base-url" if options.base_url else "OPENAI_BASE_URL")
    if base_url is None and (api_key is None or options.model in EMBEDDED_MODELS):
        model = options.model or "reference"
        if model not in EMBEDDED_MODELS:
            raise CommandError(
                f"no model server is configured (no -b/--base-url, {options.api_key_var} is "
                f"unset), and vfgym's built-in server only plays `-m reference` or `-m random`. "
                f"To evaluate {model!r}, point at its server: -b http://HOST:PORT/v1 "
                f"(and export {options.api_key_var} if it needs a key)",
                EXIT_USAGE,
            )
        return Endpoint(embedded=True, model=model)
    if not options.model:
        where = base_url or "the OpenAI API"
        hint = "" if options.base_url else " (`-m reference` plays on vfgym's built-in server)"
        raise CommandError(
            f"name the model to evaluate on {where} with -m/--model, for example "
            f"-m gpt-4.1-mini, or the name a vLLM server was started with{hint}",
            EXIT_USAGE,
        )
    return Endpoint(
        embedded=False, model=options.model, base_url=base_url, api_key=api_key or "EMPTY"
    )


def check_base_url(base_url: str, source: str) -> None:
    """Refuse a base URL the openai client can only fail to connect to, after every retry.

    `localhost:8000/v1` (no scheme) is the usual slip; it would surface minutes later
    as an unreachable server, so it is named here, before any rollout.
    """
    parts = urlsplit(base_url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return
    fix = f"-b http://{base_url}" if "://" not in base_url else "-b http://HOST:PORT/v1"
    raise CommandError(
        f"{source} {base_url!r} is not an http:// or https:// URL; give the server's full "
        f"base URL, e.g. {fix}",
        EXIT_USAGE,
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
        if _holds_results(directory):
            raise CommandError(
                f"{directory} already holds results; add --resume to continue that run, "
                "or choose another -o/--output-dir",
                EXIT_USAGE,
            )
        return directory, False
    directory = default_output_dir(options.env_id, model)
    _refuse_file_in_path(directory, given=False)
    return directory, False


def _holds_results(directory: Path) -> bool:
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


def embedded_policies(env: Any, env_id: str) -> dict[str, Any]:
    """The model names the built-in server answers to, each with its policy."""
    reference = getattr(env, "reference_policy", None)
    if not callable(reference):
        raise CommandError(
            f"{env_id} has no reference policy for vfgym's built-in server to play; evaluate a "
            "real model instead: -b http://HOST:PORT/v1 -m MODEL",
            EXIT_USAGE,
        )
    policies: dict[str, Any] = {"reference": reference}
    make_random = getattr(env, "make_random_policy", None)
    if callable(make_random):
        policies["random"] = make_random(0)
    return policies


@contextlib.contextmanager
def _quiet_rollout_warnings(verbose: bool) -> Iterator[None]:
    """Per-rollout failure warnings would drown the summary; it reports errors itself."""
    logger = logging.getLogger("vfgym")
    previous = logger.level
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    else:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(previous)


async def _evaluate(
    env: Any,
    options: EvalOptions,
    endpoint: Endpoint,
    policies: dict[str, Any] | None,
    directory: Path,
    resume: bool,
    err: IO[str],
    why_embedded: str = "",
) -> Any:
    from openai import AsyncOpenAI

    async with contextlib.AsyncExitStack() as stack:
        if endpoint.embedded:
            from vfgym.inference.server import ModelServer

            assert policies is not None
            # No request log: it would hold every conversation of the run in memory.
            server = ModelServer(policies, model_name="reference", record_requests=False)
            await stack.enter_async_context(server)
            client = server.client()
            print(
                f"{why_embedded}: playing {options.env_id}'s {endpoint.model} policy through "
                f"vfgym's built-in server at {server.base_url} as model `{endpoint.model}`. To "
                f"evaluate a real model: vfgym eval {options.env_id} -b http://HOST:PORT/v1 "
                "-m MODEL",
                file=err,
                flush=True,
            )
        else:
            client = AsyncOpenAI(
                base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0
            )
            print(
                f"Evaluating model `{endpoint.model}` at {client.base_url} on {options.env_id}",
                file=err,
                flush=True,
            )
        stack.push_async_callback(client.close)
        return await env.evaluate(
            client,
            endpoint.model,
            sampling_args=options.sampling_args or None,
            num_examples=options.num_examples,
            rollouts_per_example=options.rollouts_per_example,
            max_concurrent=options.max_concurrent,
            results_path=directory,
            resume=resume,
            use_tqdm=options.progress,
        )


def _why_embedded(options: EvalOptions, environ: Mapping[str, str]) -> str:
    if options.model in EMBEDDED_MODELS and environ.get(options.api_key_var):
        return f"No -b/--base-url and model `{options.model}`"
    return f"No model server configured (no -b/--base-url, {options.api_key_var} unset)"


def _check_numbers(options: EvalOptions) -> None:
    if options.num_examples == 0 or options.num_examples < -1:
        raise CommandError(
            "-n/--num-examples must be a positive number (or -1 for all)", EXIT_USAGE
        )
    if options.rollouts_per_example < 1:
        raise CommandError("-r/--rollouts-per-example must be at least 1", EXIT_USAGE)
    if options.max_concurrent == 0 or options.max_concurrent < -1:
        raise CommandError("-c/--max-concurrent must be positive (or -1 for no limit)", EXIT_USAGE)


def _check_run_size(env: Any, options: EvalOptions) -> None:
    """Refuse a run too large to hold (`-r 100000000000000`, a slip of the finger) before
    anything starts, rather than run out of memory building its inputs."""
    try:
        examples = len(env.get_eval_dataset(n=options.num_examples))
    except ValueError as exc:  # no rows at all
        raise CommandError(f"{options.env_id}: {exc}", EXIT_USAGE) from None
    total = examples * options.rollouts_per_example
    if total > MAX_ROLLOUTS:
        raise CommandError(
            f"{examples:,} examples x {options.rollouts_per_example:,} rollouts each is "
            f"{total:,} rollouts, more than one run holds ({MAX_ROLLOUTS:,}); lower "
            "-r/--rollouts-per-example or -n/--num-examples, or split the evaluation into "
            "several runs",
            EXIT_USAGE,
        )


def _is_unreachable(error: Any) -> bool:
    if not isinstance(error, Mapping):
        return False
    cause = error.get("cause") or {}
    kinds = {error.get("type"), cause.get("type") if isinstance(cause, Mapping) else None}
    return bool(kinds & _CONNECTION_ERRORS) or "Connection error" in str(error.get("message"))


def _check_sampling_args(env: Any, options: EvalOptions) -> None:
    """Refuse `-S` settings no rollout can run with (`stream`, `n` above 1) before
    anything starts: refused at each request instead, every rollout would error, and
    the results written could only be resumed with the same settings."""
    try:
        env.merged_sampling_args(options.sampling_args or None)
    except ValueError as exc:
        raise CommandError(f"-S/--sampling-args: {exc}", EXIT_USAGE) from None


@dataclass
class _Startup:
    """What `vfgym eval` has set up before its rollouts start, filled in step by step, so
    that a SIGTERM during startup knows what to undo and what to say."""

    options: EvalOptions
    environ: Mapping[str, str]
    endpoint: Endpoint | None = None
    directory: Path | None = None
    resume: bool = False
    made_directory: bool = False
    env: Any = None
    policies: dict[str, Any] | None = None


def _start_up(startup: _Startup) -> None:
    """Everything before the rollouts: check the options, load the environment, check
    the results directory. The user's mistakes raise CommandError."""
    options = startup.options
    _check_numbers(options)
    info = describe_environment(options.env_id)
    startup.endpoint = endpoint = resolve_endpoint(options, startup.environ)
    startup.directory, startup.resume = resolve_output_dir(options, endpoint.model)
    if info is not None and info.needs_sandbox:
        check_docker(options.env_id)
    startup.env = env = build_environment(options.env_id, options.env_args)
    _check_sampling_args(env, options)
    _check_run_size(env, options)
    if endpoint.embedded:
        startup.policies = embedded_policies(env, options.env_id)
    else:
        check_served_model(endpoint.base_url, endpoint.api_key or "EMPTY", endpoint.model)
    startup.made_directory = not startup.directory.exists()
    check_writable(startup.directory)  # first: a resume reads the files it checks
    if startup.resume:
        check_resumable(env, options, endpoint, startup.directory)


def _stopped_at_startup(startup: _Startup, how: str, code: int, err: IO[str]) -> int:
    """SIGTERM or Ctrl-C before any rollout started: one line, nothing left behind (a
    results directory this run made, still empty, is removed; an earlier run's is
    untouched), and the command that starts the run again or, on --resume, continues it."""
    directory, endpoint = startup.directory, startup.endpoint
    if directory is not None and startup.made_directory and not startup.resume:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only while empty
    line = f"{how} before any rollout started; nothing was written"
    if directory is not None and endpoint is not None:
        if startup.resume:
            again = resume_command(startup.options, endpoint, directory)
            line += f" ({directory} is as it was; continue with: {again})"
        else:
            line += (
                f" (start it again with: {restart_command(startup.options, endpoint, directory)})"
            )
    print(f"\n{line}.", file=err)
    return code


def run_eval(
    options: EvalOptions,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run `vfgym eval`; returns the exit code (CommandError for the user's mistakes).

    SIGTERM ends it cleanly from the start: while it starts up (see `_start_up`) with
    one line and exit code 143, during the rollouts as Ctrl-C does (see `_stopped`).
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    startup = _Startup(options, os.environ if environ is None else environ)
    sigterm = SigtermCancels()
    with sigterm.installed():
        try:
            with sigterm.raising():
                _start_up(startup)
        except Terminated:
            return _stopped_at_startup(startup, "Terminated (SIGTERM)", EXIT_TERMINATED, err)
        except KeyboardInterrupt:
            return _stopped_at_startup(startup, "Interrupted", EXIT_INTERRUPTED, err)
        stopped = _run_rollouts(startup, sigterm, err)
    if stopped is not None:
        return stopped
    return _report(startup, out, err)


def _run_rollouts(startup: _Startup, sigterm: SigtermCancels, err: IO[str]) -> int | None:
    """The rollouts, in an event loop SIGTERM can cancel; the exit code when stopped early."""
    options, endpoint = startup.options, startup.endpoint
    directory, resume = startup.directory, startup.resume
    assert endpoint is not None and directory is not None
    try:
        with _quiet_rollout_warnings(options.verbose), asyncio.Runner() as runner:
            why = _why_embedded(options, startup.environ)
            # boxed: the outputs are not needed here, and their repr would be (see Box)
            evaluation = _evaluate(
                startup.env, options, endpoint, startup.policies, directory, resume, err, why
            )
            runner.run(sigterm.run(boxed(evaluation)))
    except KeyboardInterrupt:
        return _stopped("Interrupted", EXIT_INTERRUPTED, options, endpoint, directory, resume, err)
    except asyncio.CancelledError:  # SIGTERM, or the task cancelled by other code
        if sigterm.received:
            how, code = "Terminated (SIGTERM)", EXIT_TERMINATED
        else:
            how, code = "Cancelled", EXIT_INTERRUPTED
        return _stopped(how, code, options, endpoint, directory, resume, err)
    except (FileExistsError, ResultsBusy) as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    except ResumeMismatch as exc:  # the inputs changed since the run started (data, version)
        raise CommandError(str(exc), EXIT_USAGE) from None
    except ResultsDiskError as exc:
        message = _disk_message(exc, options, endpoint, directory, resume)
        raise CommandError(message, EXIT_DISK) from None
    return None


#: What to do about each kind of disk trouble, by errno name.
_DISK_FIXES = {
    "ENOSPC": "free some space on its file system",
    "EDQUOT": "free some space or raise your disk quota",
    "EROFS": "make its file system writable again (it is mounted read-only)",
    "EACCES": "give yourself write permission on it",
    "EPERM": "give yourself write permission on it",
    "EFBIG": "raise the file-size limit (`ulimit -f`)",
}


def _disk_message(
    exc: ResultsDiskError,
    options: EvalOptions,
    endpoint: Endpoint,
    directory: Path,
    resume: bool,
) -> str:
    """The disk refused the results: what happened, what is kept, what to do, how to go on."""
    fix = _DISK_FIXES.get(errno.errorcode.get(exc.errno or 0, ""), "fix the disk")
    head = f"the disk refused the results in {directory}: {exc}"
    if not resume and not _holds_results(directory):
        return (
            f"{head}. Nothing was kept; {fix}, or choose another -o/--output-dir, and start "
            f"the run again with:\n  {restart_command(options, endpoint, directory)}"
        )
    return (
        f"{head}. {RESULTS_FILE} holds whole lines only (strict JSON lines); {fix}, then "
        f"continue the run with:\n  {resume_command(options, endpoint, directory)}"
    )


def _report(startup: _Startup, out: IO[str], err: IO[str]) -> int:
    """The summary of a finished run, and what failed with the command that retries."""
    directory, endpoint = startup.directory, startup.endpoint
    assert directory is not None and endpoint is not None
    metadata, records = read_results(directory)
    summary = summarize_records(records, metadata)
    print(format_summary(summary, metadata), file=out)
    shown = shlex.quote(str(directory))
    print(f"results  {directory}  (HTML report: vfgym view {shown})", file=out)
    if summary.num_errored:
        again = resume_command(startup.options, endpoint, directory)
        print(_errors_message(records, endpoint, directory, again), file=err)
        return EXIT_FAILED
    return 0


def _stopped(
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
    if not resume and not _holds_results(directory):
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


def _errors_message(
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


__all__ = [
    "EMBEDDED_MODELS",
    "Endpoint",
    "EvalOptions",
    "default_output_dir",
    "embedded_policies",
    "resolve_endpoint",
    "resolve_output_dir",
    "restart_command",
    "resume_command",
    "run_eval",
]
