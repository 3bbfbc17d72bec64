"""Hardened, fast Docker sandboxes for running untrusted code.

`SandboxPool` hands out warm `DockerSandbox`es; each runs one long-lived runner
that executes Python (stateful, like a notebook) and shell commands under strict
limits and returns an `ExecResult`. Names are imported lazily so that importing
vfgym does not load the Docker SDK until a sandbox is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vfgym.errors import (
        DockerUnavailableError,
        SandboxClosedError,
        SandboxError,
        SandboxFileError,
        SandboxFileNotFoundError,
        SandboxImageError,
        SandboxLoopError,
        SandboxLostError,
        SandboxPathError,
        SandboxStartError,
    )
    from vfgym.sandbox.config import SandboxConfig
    from vfgym.sandbox.image import build_image, default_image
    from vfgym.sandbox.pool import SandboxPool
    from vfgym.sandbox.result import ExecResult
    from vfgym.sandbox.sandbox import DockerSandbox

_EXPORTS = {
    "SandboxConfig": "vfgym.sandbox.config",
    "ExecResult": "vfgym.sandbox.result",
    "DockerSandbox": "vfgym.sandbox.sandbox",
    "SandboxPool": "vfgym.sandbox.pool",
    "build_image": "vfgym.sandbox.image",
    "default_image": "vfgym.sandbox.image",
    "SandboxError": "vfgym.errors",
    "DockerUnavailableError": "vfgym.errors",
    "SandboxImageError": "vfgym.errors",
    "SandboxStartError": "vfgym.errors",
    "SandboxLostError": "vfgym.errors",
    "SandboxClosedError": "vfgym.errors",
    "SandboxLoopError": "vfgym.errors",
    "SandboxPathError": "vfgym.errors",
    "SandboxFileError": "vfgym.errors",
    "SandboxFileNotFoundError": "vfgym.errors",
}

__all__ = [
    "DockerSandbox",
    "DockerUnavailableError",
    "ExecResult",
    "SandboxClosedError",
    "SandboxConfig",
    "SandboxError",
    "SandboxFileError",
    "SandboxFileNotFoundError",
    "SandboxImageError",
    "SandboxLoopError",
    "SandboxLostError",
    "SandboxPathError",
    "SandboxPool",
    "SandboxStartError",
    "build_image",
    "default_image",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vfgym.sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
