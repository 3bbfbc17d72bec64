"""`vfgym eval`: evaluate a model on an environment and print the summary.

With no model server configured (no base URL, no API key), the environment's own
reference policy is served by vfgym's OpenAI-compatible server on loopback, so a
first evaluation needs nothing but the install, and still runs the whole pipeline:
openai client, HTTP, rollouts, sandboxes, rubric and results on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from vfgym._async import boxed
from vfgym.cli_support import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    build_environment,
    check_docker,
    describe_environment,
)
from vfgym.results import METADATA_FILE, RESULTS_FILE, load_finished, read_results
from vfgym.summary import error_text, format_summary, latest_records, summarize_records

DEFAULT_API_KEY_VAR = "OPENAI_API_KEY"
EMBEDDED_MODELS = ("reference", "random")
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
        results = directory / RESULTS_FILE
        if results.exists() and results.stat().st_size > 0:
            raise CommandError(
                f"{directory} already holds results; add --resume to continue that run, "
                "or choose another -o/--output-dir",
                EXIT_USAGE,
            )
        return directory, False
    return default_output_dir(options.env_id, model), False


def resume_command(options: EvalOptions, endpoint: Endpoint, directory: Path) -> str:
    """The command line that continues this run where it stopped."""
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
    parts += ["--resume", str(directory)]
    return shlex.join(parts)


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
            from vfgym.server import ModelServer

            assert policies is not None
            server = ModelServer(policies, model_name="reference")
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


def _is_unreachable(error: Any) -> bool:
    if not isinstance(error, Mapping):
        return False
    cause = error.get("cause") or {}
    kinds = {error.get("type"), cause.get("type") if isinstance(cause, Mapping) else None}
    return bool(kinds & _CONNECTION_ERRORS) or "Connection error" in str(error.get("message"))


def run_eval(
    options: EvalOptions,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run `vfgym eval`; returns the exit code (CommandError for the user's mistakes)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    environ = os.environ if environ is None else environ
    _check_numbers(options)
    info = describe_environment(options.env_id)
    endpoint = resolve_endpoint(options, environ)
    directory, resume = resolve_output_dir(options, endpoint.model)
    if info is not None and info.needs_sandbox:
        check_docker(options.env_id)
    env = build_environment(options.env_id, options.env_args)
    policies = embedded_policies(env, options.env_id) if endpoint.embedded else None
    if resume:
        inputs = env.get_eval_inputs(options.num_examples, options.rollouts_per_example)
        try:
            load_finished(
                directory,
                expect={
                    "env_id": env.env_id,
                    "env_args": env.env_args,
                    "model": endpoint.model,
                    "num_inputs": len(inputs),
                    "rollouts_per_example": options.rollouts_per_example,
                },
            )
        except ValueError as exc:
            raise CommandError(str(exc), EXIT_USAGE) from None
    again = resume_command(options, endpoint, directory)
    try:
        with _quiet_rollout_warnings(options.verbose), asyncio.Runner() as runner:
            why = _why_embedded(options, environ)
            # boxed: the outputs are not needed here, and their repr would be (see Box)
            runner.run(
                boxed(_evaluate(env, options, endpoint, policies, directory, resume, err, why))
            )
    except KeyboardInterrupt:
        kept = len(load_finished(directory)) if (directory / RESULTS_FILE).exists() else 0
        print(
            f"\nInterrupted. {kept} finished rollout(s) are kept in {directory}; "
            f"continue with:\n  {again}",
            file=err,
        )
        return EXIT_INTERRUPTED
    except FileExistsError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None

    metadata, records = read_results(directory)
    summary = summarize_records(records, metadata)
    print(format_summary(summary, metadata), file=out)
    print(f"results  {directory}  (HTML report: vfgym view {directory})", file=out)
    if summary.num_errored:
        rows = latest_records(records)
        errored = [r for r in rows if r.get("error")]
        total = len(rows)
        if endpoint.embedded:
            where = "vfgym's built-in server"
        else:
            where = f"the model server at {endpoint.base_url or 'the OpenAI API'}"
        if any(_is_unreachable(r["error"]) for r in errored):
            head = (
                f"{where} was unreachable: {len(errored)} of {total} rollouts failed after retries"
            )
        else:
            head = f"{len(errored)} of {total} rollouts errored"
        print(
            f"error: {head} ({error_text(errored[0]['error'])[:300]}). The finished rollouts "
            f"are kept in {directory}; once the cause is fixed, run the errored ones again with:"
            f"\n  {again}",
            file=err,
        )
        return EXIT_FAILED
    return 0


__all__ = [
    "EMBEDDED_MODELS",
    "Endpoint",
    "EvalOptions",
    "default_output_dir",
    "embedded_policies",
    "resolve_endpoint",
    "resolve_output_dir",
    "resume_command",
    "run_eval",
]
