"""`vfgym eval`: evaluate a model on an environment and print the summary.

With no model server configured (no base URL, no API key), the environment's own
reference policy is served by vfgym's OpenAI-compatible server on loopback, so a
first evaluation needs nothing but the install, and still runs the whole pipeline:
openai client, HTTP, rollouts, sandboxes, rubric and results on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

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
from vfgym.cli.eval_directory import (
    check_resumable,
    check_writable,
    default_output_dir,
    resolve_output_dir,
    restart_command,
    resume_command,
)
from vfgym.cli.eval_messages import disk_message, errors_message, report_stopped
from vfgym.cli.eval_options import (
    DEFAULT_API_KEY_VAR,
    EMBEDDED_MODELS,
    MAX_ROLLOUTS,
    Endpoint,
    EvalOptions,
    resolve_endpoint,
)
from vfgym.engine._async import boxed
from vfgym.errors import ResultsBusy, ResultsDiskError, ResumeMismatch
from vfgym.results.jsonl import (
    read_results,
)
from vfgym.results.summary import format_summary, summarize_records


def embedded_policies(env: Any, env_id: str, model: str = "reference") -> dict[str, Any]:
    """The model names the built-in server answers to, each with its policy.

    `model`, the name asked for with -m, must be one of them: refused here, before the
    results directory is made, rather than by the server at every rollout (a 404
    each, a directory of failures and a `--resume` that could only fail again).
    """
    reference = getattr(env, "reference_policy", None)
    if not callable(reference):
        raise CommandError(
            f"{env_id} has no reference policy for vfgym's built-in server to play "
            "(it defines no `reference_policy(messages)` method); evaluate a real model "
            "instead: -b http://HOST:PORT/v1 -m MODEL",
            EXIT_USAGE,
        )
    policies: dict[str, Any] = {"reference": reference}
    make_random = getattr(env, "make_random_policy", None)
    if callable(make_random):
        policies["random"] = make_random(0)
    if model not in policies:
        raise CommandError(
            f"{env_id} has no {model} policy for vfgym's built-in server to play (it defines "
            f"no `make_random_policy(seed)` method); use -m reference, or evaluate a real "
            "model: -b http://HOST:PORT/v1 -m MODEL",
            EXIT_USAGE,
        )
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
        common: dict[str, Any] = {
            "sampling_args": options.sampling_args or None,
            "num_examples": options.num_examples,
            "rollouts_per_example": options.rollouts_per_example,
            "results_path": directory,
            "resume": resume,
            "use_tqdm": options.progress,
        }
        if options.ray is not None:
            return await _evaluate_on_cluster(env, client, endpoint.model, options, common)
        return await env.evaluate(
            client, endpoint.model, max_concurrent=options.max_concurrent, **common
        )


async def _evaluate_on_cluster(
    env: Any, client: Any, model: str, options: EvalOptions, common: dict[str, Any]
) -> Any:
    """`--ray`: the same evaluation, its groups played by the cluster's workers (each
    plays up to --max-concurrent rollouts at once)."""
    from vfgym.cluster import evaluate

    per_worker = max(1, options.max_concurrent // max(1, options.rollouts_per_example))
    return await evaluate(
        env, client, model, ray=options.ray, groups_per_worker=per_worker, **common
    )


def _why_embedded(options: EvalOptions, environ: Mapping[str, str]) -> str:
    if options.model in EMBEDDED_MODELS and environ.get(options.api_key_var):
        return f"No -b/--base-url and model `{options.model}`"
    return f"No model server configured (no -b/--base-url, {options.api_key_var} unset)"


def _check_ray(options: EvalOptions) -> None:
    """--ray needs ray installed: say how to install it before anything runs."""
    if options.ray is None:
        return
    from vfgym.cluster.connect import check_address, require_ray

    # This process is the command's: Ray's crash handler (read when ray is imported)
    # would take SIGTERM from the command's own, which stops the workers and says how
    # to resume, and abort the process instead.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        check_address(options.ray)
        require_ray()
    except (ImportError, ValueError) as exc:
        raise CommandError(f"--ray: {exc}", EXIT_USAGE) from exc


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
    _check_ray(options)
    info = describe_environment(options.env_id)
    startup.endpoint = endpoint = resolve_endpoint(options, startup.environ)
    startup.directory, startup.resume = resolve_output_dir(options, endpoint.model)
    if info is not None and info.needs_sandbox:
        check_docker(options.env_id)
    startup.env = env = build_environment(options.env_id, options.env_args)
    _check_sampling_args(env, options)
    _check_run_size(env, options)
    if endpoint.embedded:
        startup.policies = embedded_policies(env, options.env_id, endpoint.model)
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
        return report_stopped(
            "Interrupted", EXIT_INTERRUPTED, options, endpoint, directory, resume, err
        )
    except asyncio.CancelledError:  # SIGTERM, or the task cancelled by other code
        if sigterm.received:
            how, code = "Terminated (SIGTERM)", EXIT_TERMINATED
        else:
            how, code = "Cancelled", EXIT_INTERRUPTED
        return report_stopped(how, code, options, endpoint, directory, resume, err)
    except (FileExistsError, ResultsBusy) as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    except ResumeMismatch as exc:  # the inputs changed since the run started (data, version)
        raise CommandError(str(exc), EXIT_USAGE) from None
    except ResultsDiskError as exc:
        message = disk_message(exc, options, endpoint, directory, resume)
        raise CommandError(message, EXIT_DISK) from None
    return None


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
        print(errors_message(records, endpoint, directory, again), file=err)
        return EXIT_FAILED
    return 0


__all__ = [
    "DEFAULT_API_KEY_VAR",
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
