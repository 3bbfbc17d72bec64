"""What `vfgym eval` was asked to do, and where the model it evaluates lives.

Kept apart so the parser, the run and the messages share one description of a run
without importing each other: the options as parsed, and the endpoint they resolve
to (vfgym's built-in server, or a configured one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from vfgym.cli._support import (
    EXIT_USAGE,
    CommandError,
)

DEFAULT_API_KEY_VAR = "OPENAI_API_KEY"
EMBEDDED_MODELS = ("reference", "random")
#: The most rollouts one run takes on: every one is an input row built before the first
#: starts (about half a kilobyte each, before its conversation; ten million is some 5 GB),
#: so far more would run the machine out of memory and have the process killed with
#: nothing said. Larger evaluations are split into several runs.
MAX_ROLLOUTS = 10_000_000


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
    ray: str | None = None  # a Ray cluster's address: run the rollouts there


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
