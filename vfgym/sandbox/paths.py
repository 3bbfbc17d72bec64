"""Checking file paths against the workspace before anything is sent to a sandbox.

The runner checks again inside the container and walks the path without
following symlinks; this first check gives the caller a clear error at once.
"""

from __future__ import annotations

import posixpath

from vfgym.errors import SandboxPathError


def workspace_relative(path: str, workspace: str) -> str:
    """`path` (relative, or absolute under `workspace`) as a clean relative path."""
    if not isinstance(path, str):
        raise SandboxPathError(f"a sandbox path must be a str, got {type(path).__name__}")
    if not path or "\0" in path:
        raise SandboxPathError(f"{path!r} is not a usable file path")
    try:
        # As the runner will encode it: os.fsdecode's escapes of bytes that are not
        # UTF-8 stand for those bytes; any other surrogate stands for nothing at all.
        path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise SandboxPathError(
            f"{path!r} cannot be encoded as a file name (it holds a lone surrogate)"
        ) from None
    root = workspace.rstrip("/")
    if path.startswith("/"):
        if path != root and not path.startswith(root + "/"):
            raise SandboxPathError(
                f"{path!r} is outside the sandbox workspace {root}; use a path relative to "
                f"it or one that starts with {root}/"
            )
        path = path[len(root) :]
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise SandboxPathError(
            f"{path!r} contains '..'; sandbox paths may not climb out of the workspace"
        )
    if not parts:
        raise SandboxPathError(f"{path!r} names the workspace itself, not a file inside it")
    return posixpath.join(*parts)
