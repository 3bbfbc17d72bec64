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


class SandboxPathError(SandboxError, ValueError):
    """A file path points outside the workspace or through a symlink."""


class SandboxFileError(SandboxError, OSError):
    """A file operation inside the workspace failed (missing file, too large, disk full)."""


class SandboxFileNotFoundError(SandboxFileError, FileNotFoundError):
    """The file asked for does not exist in the workspace."""
