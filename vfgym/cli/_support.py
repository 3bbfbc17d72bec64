"""Pieces every `vfgym` subcommand shares: user errors, JSON options, loading an environment.

A `CommandError` carries a message for the user and an exit code, so each
subcommand can stop with a clear sentence instead of a traceback.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import signal
import threading
from collections.abc import Coroutine, Iterator
from importlib import resources
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from vfgym.envs.registry import EnvironmentInfo, UnexpectedArgumentError, describe, load_environment
from vfgym.errors import EnvironmentImportError, UnknownEnvironmentError, VFGymError

if TYPE_CHECKING:  # asyncio is imported by the commands that run a loop, not by the parser
    import asyncio

#: Exit codes: 1 the run failed, 2 the command line was wrong, 74 the disk refused the
#: results (full, read-only, no permission, quota: sysexits' EX_IOERR), 130 interrupted
#: (Ctrl-C, or its task cancelled), 143 terminated (SIGTERM: 128 + 15, what a shell
#: reports for it).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DISK = 74
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM

T = TypeVar("T")


class CommandError(VFGymError):
    """A failure the user can fix; the CLI prints the message and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


#: What each JSON option's error shows as an example: one of that option's own settings.
_JSON_EXAMPLES = {
    "-S/--sampling-args": """'{"temperature": 0.7}'""",
    "-a/--env-args": """'{"difficulty": "hard"}'""",
}


def parse_json_object(flag: str, text: str | None) -> dict[str, Any]:
    """The JSON object given to `flag`, or a CommandError naming the flag and the JSON error."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        example = _JSON_EXAMPLES.get(flag, """'{"key": 1}'""")
        raise CommandError(
            f"{flag} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(in {text!r}). Give a JSON object in single quotes, e.g. {example}",
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
    """The registry's description of `env_id` (a registered name, `module:function` or a
    path to a .py file); None for a verifiers-style module found by name.

    Raises CommandError (with the closest names) when nothing by that name exists, and
    with the module's own error when it fails to import.
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
    except EnvironmentImportError as exc:  # the same words as gym.make and the registry's
        raise CommandError(str(exc)) from None
    except Exception as exc:  # a module that imported but cannot be described
        raise CommandError(
            f"environment {env_id!r} cannot be described: {type(exc).__name__}: {exc}"
        ) from None


def build_environment(env_id: str, env_args: dict[str, Any]) -> Any:
    """`load_environment(env_id, **env_args)` with the loader's complaints made readable."""
    try:
        return load_environment(env_id, **env_args)
    except UnknownEnvironmentError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    except EnvironmentImportError as exc:
        raise CommandError(str(exc)) from None
    except UnexpectedArgumentError as exc:
        raise CommandError(
            f"{_refused(env_id, env_args)}: {_unexpected_a_arguments(exc)}", EXIT_USAGE
        ) from None
    except (TypeError, ValueError) as exc:
        raise CommandError(f"{_refused(env_id, env_args)}: {exc}", EXIT_USAGE) from None


def _refused(env_id: str, env_args: dict[str, Any]) -> str:
    return f"environment {env_id!r} refused its arguments (-a/--env-args {json.dumps(env_args)})"


def _unexpected_a_arguments(exc: UnexpectedArgumentError) -> str:
    """Which `-a` names are unknown, what is taken instead, and the likely intended name:
    said in terms of `-a`, where the names were typed."""
    names = ", ".join(repr(name) for name in exc.names)
    head = (
        f"-a argument {names} is not a parameter it takes"
        if len(exc.names) == 1
        else f"-a arguments {names} are not parameters it takes"
    )
    guesses = [f"{close!r}" for close in exc.suggestions.values()]
    if len(exc.names) > 1:
        guesses = [f"{close!r} for {name!r}" for name, close in exc.suggestions.items()]
    hint = f" Did you mean {', '.join(guesses)}?" if guesses else ""
    return f"{head}; {exc.accepted}.{hint} Correct the name in -a, or leave it out."


class Terminated(BaseException):
    """SIGTERM during `SigtermCancels.raising()`: the work before the event loop stops here.

    A BaseException, as KeyboardInterrupt is, so that no `except Exception` on the way
    (an environment's loader, a wrapped import error) turns it into an error message.
    """


class SigtermCancels:
    """SIGTERM, while `installed()`, cancels the task that `run()` runs in.

    Left to its default, SIGTERM (`kill`, a container or job scheduler stopping the
    process) ends the process on the spot: the results file is left marked as running
    and nothing says how to continue. Cancelling the task instead unwinds the run as
    asyncio.Runner does for Ctrl-C, so the results are closed as interrupted and the
    command can say how to resume; before the event loop runs, inside `raising()`, it
    raises `Terminated` instead. The handler is installed only for the command, from the
    main thread, and the previous one put back; a second SIGTERM gets that previous one
    at once (by default: the process ends), for a run that does not unwind.
    """

    def __init__(self) -> None:
        self.received = False
        self._task: asyncio.Task[Any] | None = None
        self._previous: Any = None
        self._raising = False

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        """SIGTERM raises `Terminated` here (the main thread's work before the event loop:
        loading the environment, checking the results directory), as Ctrl-C raises
        KeyboardInterrupt, so startup ends as cleanly as a run does. Needs `installed()`."""
        if self.received:
            raise Terminated
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` in a task SIGTERM can cancel: start `asyncio.Runner.run` with it."""
        import asyncio

        if self.received:  # SIGTERM came while the event loop was starting
            coro.close()
            raise asyncio.CancelledError
        self._task = asyncio.current_task()
        try:
            return await coro
        finally:
            self._task = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[SigtermCancels]:
        """The handler, in place for the `with` block only.

        Nothing is installed off the main thread (Python allows signal handlers only
        there), nor over a SIGTERM that is ignored on purpose or handled outside Python.
        """
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is None or previous == signal.SIG_IGN:
            yield self
            return
        self._previous = previous
        signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        signal.signal(signal.SIGTERM, self._previous)
        if self._raising:
            self._raising = False
            raise Terminated
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            task.get_loop().call_soon_threadsafe(lambda: None)  # wake a loop waiting on I/O


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
        from vfgym.errors import SandboxError
        from vfgym.sandbox.docker_client import docker_host, make_client
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


def check_served_model(
    base_url: str | None, api_key: str, model: str, timeout: float = 10.0
) -> None:
    """Refuse, before a run starts, a model name the server says it does not serve.

    A wrong `-m` (`Qwen3-8B` for a server started as `vllm serve Qwen/Qwen3-8B`) would
    fail every rollout with a 404 and leave a results directory that only resumes with
    that same wrong name. Only a clear "no such model" refuses: a server that cannot
    list its models, refuses the key or is unreachable is left to the run, which
    retries and reports; and a name its list lacks but GET /v1/models/NAME still finds
    (Ollama's `llama3` for the listed `llama3:latest`) is accepted.
    """
    import openai

    with openai.OpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout
    ) as client:
        try:
            served = [str(card.id) for card in client.models.list()]
        except Exception:  # any failure to list: not evidence against the name
            return
        if not served or model in served:
            return
        if _may_serve(client, model):
            return
        where = str(client.base_url).rstrip("/")
    raise CommandError(_not_served(where, model, served), EXIT_USAGE)


def _may_serve(client: Any, model: str) -> bool:
    """False only when the server answers GET /v1/models/NAME with 404 Not Found."""
    import openai

    try:
        client.models.retrieve(model)
    except openai.NotFoundError:
        return False
    except Exception:  # no such route, an odd body: not evidence against the name
        return True
    return True


def _not_served(where: str, model: str, served: list[str]) -> str:
    """The refusal of `model`: the closest served names, then (some of) the others."""
    close = [name for name in served if model.lower() in name.lower()]
    close += difflib.get_close_matches(model, served, n=3, cutoff=0.5)
    close = list(dict.fromkeys(close))[:3]
    guess = f" Did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
    shown = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
    return (
        f"the server at {where} does not serve a model named {model!r}.{guess} It serves: "
        f"{shown} (GET /v1/models). Give one of those names with -m/--model."
    )


__all__ = [
    "EXIT_DISK",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "CommandError",
    "SigtermCancels",
    "Terminated",
    "build_environment",
    "check_docker",
    "check_served_model",
    "describe_environment",
    "parse_json_object",
    "setup_script_hint",
]
