"""Every exception a user of vfgym can meet, in one tree.

Each derives from `VFGymError`, so `except vf.VFGymError` catches anything vfgym raises
on purpose, and most also keep the standard base they had (a bad argument is still a
`ValueError` or `TypeError`, a timeout a `TimeoutError`), so code written against those
keeps working. Every message says what went wrong and what to do.

    VFGymError
    ├── ModelCallError                    the model server failed, even after retries
    │   ├── NoModelTurnError              the first prompt never fit: no model turn at all
    │   └── ServerUnreachable             the run's circuit breaker gave up on the server
    ├── ContextLengthExceeded             the conversation outgrew the context window
    ├── TokenBudgetExhausted              a rollout spent its completion-token budget
    ├── ResultCallbackError (RuntimeError)     an `on_result` callback raised
    ├── SubEnvError (RuntimeError)        sub-envs of a vector env failed
    ├── environments and their loading
    │   ├── UnknownEnvironmentError (LookupError)
    │   ├── EnvironmentImportError (ImportError)  its module (or file) failed to import
    │   ├── HollowPackageError (ImportError)  `vfgym` imported from a folder without __init__.py
    │   ├── UnexpectedArgumentError (TypeError)
    │   ├── UnknownTaskError (KeyError)   a task that names no EnvGroup member
    │   ├── InvalidMove (ValueError)      a game move that breaks the rules
    │   └── MessagesNotFlattenableError (NotImplementedError, ValueError)
    ├── user code: tools, reward functions
    │   ├── ToolTimeoutError (TimeoutError)
    │   ├── CallTimeoutError (TimeoutError)
    │   ├── AbandonedThreadsError (RuntimeError)
    │   └── SyncScoringUnavailable (TypeError)
    ├── training data
    │   ├── MissingTokenIdsError (ValueError)
    │   ├── LogprobCountError (ValueError)
    │   ├── TemplateAlignmentError (ValueError)
    │   ├── ServerTokenizerError (RuntimeError)
    │   └── TokenMismatchError (ValueError)   a turn's ids are not what the model was shown
    ├── IntegrationVersionError (ImportError)  a trainer (TRL) outside the tested versions
    ├── results files
    │   ├── ResultsBusy (RuntimeError)    another writer holds the directory
    │   ├── ResumeMismatch (ValueError)   the directory holds another run
    │   └── ResultsDiskError (OSError)    the disk refused a write: full, read-only, quota
    ├── served environments (vfgym.remote)
    │   ├── RemoteEnvError (RuntimeError)   the env server answered a frame with an error
    │   └── RemoteEnvUnavailable (ConnectionError)  unreachable, refused, gone or silent
    ├── the loopback model server
    │   ├── UnknownModelError (LookupError)
    │   ├── PolicyReplyError (TypeError)
    │   └── PolicyCancelledError (RuntimeError)
    ├── SandboxError (RuntimeError)
    │   ├── DockerUnavailableError
    │   │   └── DockerHostLostError       a sandbox's Docker host went away mid-call
    │   ├── SandboxImageError
    │   ├── SandboxStartError
    │   ├── SandboxLostError
    │   ├── SandboxClosedError
    │   ├── SandboxLoopError
    │   ├── SandboxPathError (ValueError)
    │   └── SandboxFileError (OSError)
    │       └── SandboxFileNotFoundError (FileNotFoundError)
    ├── running on a Ray cluster (vfgym.cluster)
    │   ├── RayUnavailableError (ImportError)   ray is not installed
    │   └── ClusterError (RuntimeError)   no worker is left, or none could start
    ├── VerifiersNameUnavailable (ImportError)  a verifiers 0.1.x name vfgym does not offer
    ├── ExampleDatasetUnavailable (RuntimeError) `load_example_dataset` could not load it
    └── CommandError                      a `vfgym` command's user error (vfgym.cli)

Defined here, except `CommandError`, which belongs to the CLI; each is also importable
from the module that raises it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class VFGymError(Exception):
    """Base class of every error vfgym raises on purpose."""


class ModelCallError(VFGymError):
    """The model server could not answer, even after retries.

    The rollout that met it ends with `state["error"]` and is reported as errored,
    never scored as a wrong answer.
    """

    def __init__(self, message: str, *, attempts: int, cause: BaseException | None = None):
        super().__init__(message)
        self.attempts = attempts
        self.cause = cause


class NoModelTurnError(ModelCallError):
    """The rollout's first prompt does not fit the context window: the model never answered.

    Not a wrong answer but a rollout that never ran, so it ends errored (reward NaN),
    with the server's message in `state["error"]`; shorten the prompt or serve the
    model with a longer window (vLLM's --max-model-len).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, attempts=1)


class ServerUnreachable(ModelCallError):
    """The run stopped sending work to a model server that refused every connection.

    Raised for the rollouts left after N consecutive connection failures (the
    circuit breaker); the finished ones are in the results directory, and the run
    resumes from there once the server is back (`vfgym eval ... --resume`).
    """


class ContextLengthExceeded(VFGymError):
    """The conversation no longer fits the model's context window.

    Not a failure of the server: the rollout ends as truncated.
    """


class TokenBudgetExhausted(VFGymError):
    """The rollout spent its budget of completion tokens across turns."""


class ResultCallbackError(VFGymError, RuntimeError):
    """The `on_result` callback raised for one or more results of a finished batch.

    The callback's failure is the caller's bug, not the rollouts': every rollout
    still ran, was scored and recorded (results.jsonl, when a `results_path` was
    given) and the callback was still offered every later result. `outputs` is
    what the batch would have returned; `errors` maps each rollout index the
    callback failed on to its exception, the first of which is also `__cause__`.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: dict[int, BaseException] | None = None,
        outputs: Any = None,
    ):
        # (Defaults so that pickle and copy, which call the class with the message
        # alone and then restore the attributes, can rebuild it.)
        super().__init__(message)
        self.errors = {} if errors is None else errors
        self.outputs = outputs


class SubEnvError(VFGymError, RuntimeError):
    """`step()` or `reset()` of a vector env failed in one or more of its sub-envs.

    The other sub-envs did their part, and nothing they did is lost: `results` is
    the batch the call would have returned, in which each failed sub-env's slot
    carries `info["error"]` (after a step, its episode ended there: truncated, reward
    0.0). `errors` maps each failed sub-env's index to its exception; the first is
    also this error's `__cause__`. The failed sub-envs must be reset before the
    vector env steps again: `reset(options={"reset_mask": mask})` for them alone.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: dict[int, BaseException] | None = None,
        results: tuple[Any, ...] = (),
    ):
        # (Defaults so that pickle and copy, which call the class with the message
        # alone and then restore the attributes, can rebuild it.)
        super().__init__(message)
        self.errors = {} if errors is None else errors
        self.results = results


class VerifiersNameUnavailable(VFGymError, ImportError):
    """An environment written for verifiers 0.1.x asked the `verifiers` alias
    (`vfgym.compat`) for a module or a name vfgym deliberately does not provide (the
    training stack, the `vf-*` scripts, hub helpers). The message says what to use
    instead. An ImportError, so `from verifiers.x import name` fails with this
    message rather than a bare "cannot import name".
    """


class ExampleDatasetUnavailable(VFGymError, RuntimeError):
    """`load_example_dataset` was asked for a data set verifiers 0.1.x did not know,
    or its hub data set could not be loaded (no network, no cached copy): build the
    rows yourself (a `datasets.Dataset` of `question` and `answer`) and pass them to
    the environment.
    """


def error_record(exc: BaseException) -> dict[str, Any]:
    """The JSON-friendly form of an exception stored in `state["error"]`."""
    record: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    cause = getattr(exc, "cause", None) or exc.__cause__
    if cause is not None:
        record["cause"] = {"type": type(cause).__name__, "message": str(cause)}
    return record


# -- sandboxes ---------------------------------------------------------------------------


class SandboxError(VFGymError, RuntimeError):
    """Base class of every sandbox failure."""


class DockerUnavailableError(SandboxError):
    """No Docker Engine answers at the configured endpoint."""


class DockerHostLostError(DockerUnavailableError):
    """The Docker host of a sandbox stopped answering while a call ran.

    An infrastructure failure (the rollout ends as an error, not as a wrong answer);
    a pool with several hosts places new sandboxes on the others meanwhile.
    """


class SandboxImageError(SandboxError):
    """The sandbox image is missing or could not be built."""


class SandboxStartError(SandboxError):
    """A container was created but its runner never became ready."""


class SandboxLostError(SandboxError):
    """The container or its runner died, or the stream to it broke.

    The sandbox cannot be used again; a pool replaces it with a fresh one.
    """


class SandboxClosedError(SandboxError):
    """The sandbox (or pool) was used after it was closed."""


class SandboxLoopError(SandboxError):
    """A sandbox was called from another event loop than the one it started on (a sync
    tool that runs it with `asyncio.run`, say): its stream belongs to that loop."""


class SandboxPathError(SandboxError, ValueError):
    """A file path points outside the workspace or through a symlink."""


class SandboxFileError(SandboxError, OSError):
    """A file operation inside the workspace failed (missing file, too large, disk full)."""


class SandboxFileNotFoundError(SandboxFileError, FileNotFoundError):
    """The file asked for does not exist in the workspace."""


#: Failures of the sandbox machinery, never of the code the model ran. A tool that
#: raises one of these does not answer the model with an error message (which would
#: count as the model's failed call): `SandboxEnv` lets it end the rollout as an
#: error (`state["error"]`, stop reason "error"), as a failed model server does.
#: What the model's own code causes is a result, not one of these: a timeout, an
#: exception in its program, an out-of-memory kill, even a crash that takes the
#: sandbox down (the env replaces the sandbox and tells the model). Path and file
#: errors (`SandboxPathError`, `SandboxFileError`) are the model's arguments at fault.
INFRASTRUCTURE_ERRORS: tuple[type[SandboxError], ...] = (
    DockerUnavailableError,
    SandboxImageError,
    SandboxStartError,
    SandboxLostError,
    SandboxClosedError,
    SandboxLoopError,
)


# -- Ray clusters ------------------------------------------------------------------------


class RayUnavailableError(VFGymError, ImportError):
    """A cluster run was asked for, but ray is not installed: `pip install 'vfgym[ray]'`."""


class ClusterError(VFGymError, RuntimeError):
    """A cluster run cannot go on: no worker could start, or every worker died.

    The groups already written stay in results.jsonl; `resume=True` continues the run.
    """


# -- training data -----------------------------------------------------------------------


class TemplateAlignmentError(VFGymError, ValueError):
    """The chat template rewrites a model turn so that the environment's ids cannot be placed."""


class ServerTokenizerError(VFGymError, RuntimeError):
    """The server's `/tokenize` endpoint could not be reached or did not answer with ids."""


class TokenMismatchError(VFGymError, ValueError):
    """A rollout's assembled ids are not the ids the server was shown for one of its turns.

    Training on them would score the model's sampled ids in a context it never saw
    (the chat template re-renders earlier turns differently): `vfgym.integrations.trl`
    raises this instead of training on a sequence that is not what was sampled.
    """


class IntegrationVersionError(VFGymError, ImportError):
    """An installed trainer package (TRL) is outside the versions vfgym's integration is
    tested with; the message names the installed version and the range to install."""


class LogprobCountError(VFGymError, ValueError):
    """A response's logprobs do not pair one to one with its token ids."""


class MissingTokenIdsError(VFGymError, ValueError):
    """A response carries no token ids, and vfgym will not guess them from the text."""


# -- user code: tools and reward functions -----------------------------------------------


class CallTimeoutError(VFGymError, TimeoutError):
    """A call did not finish within its time limit and was cancelled or abandoned."""

    def __init__(self, limit: float) -> None:
        super().__init__(f"the call did not finish within {limit:g} s")
        self.limit = limit


class AbandonedThreadsError(VFGymError, RuntimeError):
    """A limited sync call was not started: too many earlier calls given up at their
    limit still run in their threads (a function that never returns, called again)."""


# -- environments and their loading ------------------------------------------------------


class UnexpectedArgumentError(VFGymError, TypeError):
    """Argument names an environment does not take: the loader's, or, for a loader that
    passes `**kwargs` on, those of what it passes them to.

    The parts of the message are kept apart so that a caller which knows where the
    arguments came from (`vfgym eval -a`) can say so; `str()` says it for Python callers.
    """

    def __init__(
        self, env_id: str, names: Iterable[str], accepted: str, suggestions: dict[str, str]
    ) -> None:
        self.env_id = env_id
        self.names = sorted(names)
        #: Which parameters are taken, as a clause: "it takes: a, b".
        self.accepted = accepted
        #: The closest accepted name for each unknown one that has one, in `names`' order.
        self.suggestions = {name: suggestions[name] for name in self.names if name in suggestions}
        hints = [f"{name!r}: did you mean {close!r}?" for name, close in self.suggestions.items()]
        super().__init__(
            f"environment {env_id!r} does not take argument(s) {self.names}; {accepted}"
            + (f" ({'; '.join(hints)})" if hints else "")
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable (a worker process may raise it), rebuilt from its parts."""
        return type(self), (self.env_id, self.names, self.accepted, self.suggestions)


class UnknownTaskError(VFGymError, KeyError):
    """A task that names no environment of the group. A KeyError, shown as its message
    (a plain KeyError shows the repr of its text, in quotes)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownEnvironmentError(VFGymError, LookupError):
    """No environment is registered under that name."""


class EnvironmentImportError(VFGymError, ImportError):
    """An environment exists (registered, or named as `module:function` or a file) but
    its module failed to import.

    Raised the same way by `load_environment`, `describe`, `gym.make` and every `vfgym`
    command, with the module's own error as `__cause__` and in the message, so a broken
    package is never reported as a name that does not exist.
    """

    def __init__(self, environment: str, target: str, cause: BaseException, hint: str = ""):
        detail = " ".join(f"{type(cause).__name__}: {cause}".split())
        super().__init__(
            f"environment {environment!r} ({target}) failed to import: {detail}"
            + (f". {hint}" if hint else "")
        )
        self.environment = environment
        self.target = target


class HollowPackageError(VFGymError, ImportError):
    """`vfgym` was imported as an empty namespace package: a folder named `vfgym` with
    no `__init__.py` (a source checkout's folder, next to the script) came first on
    sys.path.

    Python imports such a folder without complaint, and an editable install still
    finds most of vfgym's modules, so without this check the failure shows up far
    away: environments drop out of the registry, `vf.ToolEnv` is missing.
    """


class ToolTimeoutError(VFGymError, TimeoutError):
    """A tool call that did not finish within its time limit (`tool_timeout`).

    Its message is what the model reads (through `error_formatter`): which tool, which
    limit, and that the call is over, so the model neither waits for a result nor
    takes a half-done action for a done one.
    """

    def __init__(self, tool: str, limit: float) -> None:
        super().__init__(
            f"tool {tool} did not finish within {limit:g} s, its time limit, so the call was "
            "stopped and nothing it returns later is used; call it again with less to do, "
            "or go on without it"
        )
        self.tool = tool
        self.limit = limit


# -- the loopback model server -----------------------------------------------------------


class PolicyCancelledError(VFGymError, RuntimeError):
    """A policy raised CancelledError although its request was not cancelled."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name} raised asyncio.CancelledError although the request was not cancelled "
            "(a task or future it awaited was cancelled); catch it in the policy, or "
            "return a reply"
        )


class PolicyReplyError(VFGymError, TypeError):
    """A policy returned something that is not an assistant reply."""


class RemoteEnvError(VFGymError, RuntimeError):
    """An env server (`vfgym serve-env`) answered with an error frame.

    `code` is OpenEnv's error code (`VALIDATION_ERROR`, `EXECUTION_ERROR`,
    `CAPACITY_REACHED`, ...); the message is the server's, which says what to do.
    """

    def __init__(self, message: str, code: str = "SESSION_ERROR") -> None:
        super().__init__(message)
        self.code = code


class RemoteEnvUnavailable(VFGymError, ConnectionError):
    """An env server could not be reached, refused the connection (a wrong token), closed
    the session, or did not answer within the client's timeout."""


class UnknownModelError(VFGymError, LookupError):
    """The request named a model this server does not serve."""

    def __init__(self, model: Any, known: list[str]) -> None:
        super().__init__(f"The model `{model}` does not exist. This server serves: {known}.")
        self.model = model
        self.known = known


# -- the Gym adapter ---------------------------------------------------------------------


class MessagesNotFlattenableError(VFGymError, NotImplementedError, ValueError):
    """A message list has no fixed-size numeric form: `flatten` and the like refuse it.

    A `NotImplementedError`, as Gymnasium raises for spaces it cannot flatten, and a
    `ValueError`, as its `flatdim` raises for spaces that are not numpy-flattenable,
    so code catching either keeps working.
    """

    def __init__(self, space: Any) -> None:
        super().__init__(
            f"{space!r} holds lists of chat messages, which cannot be flattened to a "
            'numpy array; make the env with observation_mode="text" (the default), '
            "whose text flattens to a Box of code points"
        )


class SyncScoringUnavailable(VFGymError, TypeError):
    """`score_rollout_sync` was asked to score with async reward functions (or for a
    rubric that scores its own way); nothing was called, score with `score_rollout`."""


# -- results files -----------------------------------------------------------------------


#: Metadata that must match for `resume` to continue a run rather than mix two runs.
class ResumeMismatch(VFGymError, ValueError):
    """A run cannot be resumed: its metadata describes another run than this one."""


class ResultsBusy(VFGymError, RuntimeError):
    """Another writer (another `vfgym eval`, or another batch) is writing to the directory."""


class ResultsDiskError(VFGymError, OSError):
    """The disk refused to hold the results: no space, read-only, no permission, quota.

    Not the model's failure nor a bug: the run stops, and what it finished is kept.
    The results file was cut back to its last complete line before this was raised,
    so it is strict JSON lines and `--resume` continues it once the disk is fixed.
    `directory` is the results directory, `kept` the rollouts whose lines are on disk,
    `errno` the operating system's error number (ENOSPC, EROFS, EACCES, EDQUOT, ...).
    """

    def __init__(
        self, message: str, *, directory: str = "", kept: int = 0, error_number: int | None = None
    ):
        # (Defaults so that pickle and copy, which call the class with the message
        # alone and then restore the attributes, can rebuild it.)
        super().__init__(message)
        self.directory = directory
        self.kept = kept
        self.errno = error_number


# -- games -------------------------------------------------------------------------------


class InvalidMove(VFGymError, ValueError):
    """A move that breaks the rules or cannot be read; its message is shown to the player."""
