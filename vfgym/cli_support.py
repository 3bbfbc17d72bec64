"""Pieces every `vfgym` subcommand shares: user errors, JSON options, loading an environment.

A `CommandError` carries a message for the user and an exit code, so each
subcommand can stop with a clear sentence instead of a traceback.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from vfgym.registry import EnvironmentInfo, UnknownEnvironmentError, describe, load_environment

#: Exit codes: 1 the run failed, 2 the command line was wrong, 130 interrupted (Ctrl-C).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A failure the user can fix; the CLI prints the message and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


def parse_json_object(flag: str, text: str | None) -> dict[str, Any]:
    """The JSON object given to `flag`, or a CommandError naming the flag and the JSON error."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{flag} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(in {text!r}). Give a JSON object in single quotes, "
            """e.g. '{"temperature": 0.7}'""",
            EXIT_USAGE,
        ) from None
    if not isinstance(value, dict):
        raise CommandError(
            f"{flag} must be a JSON object such as '{{\"key\": 1}}', "
            f"not a JSON {type(value).__name__} ({text!r})",
            EXIT_USAGE,
        )
    return value


def describe_environment(env_id: str) -> EnvironmentInfo | None:
    """The registry's description of `env_id`; None for a verifiers-style module found by name.

    Raises CommandError (with the closest names) when nothing by that name exists.
    """
    try:
        return describe(env_id)
    except UnknownEnvironmentError as exc:
        module = env_id.replace("-", "_")
        if module.isidentifier():
            import importlib.util

            try:
                if importlib.util.find_spec(module) is not None:
                    return None
            except (ImportError, ValueError):
                pass
        raise CommandError(str(exc), EXIT_USAGE) from None
    except Exception as exc:  # the environment's module failed to import
        raise CommandError(
            f"environment {env_id!r} is registered but its module failed to import: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def build_environment(env_id: str, env_args: dict[str, Any]) -> Any:
    """`load_environment(env_id, **env_args)` with the loader's complaints made readable."""
    try:
        return load_environment(env_id, **env_args)
    except UnknownEnvironmentError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    except (TypeError, ValueError) as exc:
        raise CommandError(
            f"environment {env_id!r} refused its arguments (-a/--env-args {json.dumps(env_args)}):"
            f" {exc}",
            EXIT_USAGE,
        ) from None


def setup_script_hint() -> str:
    """How to start Docker: the repository's script, and where the installed copy lives."""
    hint = "`sudo bash sandboxes/setup-docker.sh` (from the vfgym repository"
    try:
        installed = resources.files("vfgym.sandboxes") / "setup-docker.sh"
        if installed.is_file():
            hint += f"; installed copy: {installed}"
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return hint + ")"


def check_docker(env_id: str) -> None:
    """Fail early, with what to run, when a sandboxed environment has no Docker Engine."""
    fix = f"Start one with {setup_script_hint()}, then check with `vfgym sandbox doctor`."
    try:
        from vfgym.sandbox.docker_client import docker_host, make_client
        from vfgym.sandbox.errors import SandboxError
    except ImportError as exc:
        raise CommandError(
            f"{env_id} runs code in a Docker sandbox, but vfgym's sandbox runtime cannot be "
            f"imported ({exc}); reinstall vfgym"
        ) from None
    try:
        client = make_client(None, timeout=10)
    except SandboxError as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        raise CommandError(
            f"{env_id} runs code in a Docker sandbox, but no Docker daemon answers at "
            f"{docker_host(None)} ({type(cause).__name__}: {str(cause)[:200]}). {fix}"
        ) from None
    client.close()


__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CommandError",
    "build_environment",
    "check_docker",
    "describe_environment",
    "parse_json_object",
    "setup_script_hint",
]
