"""Exceptions of the sandbox runtime, each saying what went wrong and what to do."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """Base class of every sandbox failure."""


class DockerUnavailableError(SandboxError):
    """No Docker Engine answers at the configured endpoint."""


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
