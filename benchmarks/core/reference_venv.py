"""The reference library's own virtual environment, made and kept by the benchmark.

The comparison is only fair if the reference runs with exactly the release and
the dependencies it declares, never next to vfgym's: so it gets a venv of its
own under the user's cache, built once with the ordinary `pip` and reused while
its marker file says it holds the wanted version.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

REFERENCE = "verifiers"
REFERENCE_VERSION = "0.1.7.post0"
CACHE_ENV_VAR = "VFGYM_BENCH_CACHE"


class ReferenceSetupError(RuntimeError):
    """The reference venv could not be built; the message says what to try."""


def cache_root() -> Path:
    """Where benchmark venvs live: $VFGYM_BENCH_CACHE, else ~/.cache/vfgym-bench."""
    override = os.environ.get(CACHE_ENV_VAR)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vfgym-bench"


def venv_python(root: Path) -> Path:
    """The interpreter of the venv at `root`."""
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_reference_venv(
    version: str = REFERENCE_VERSION, root: Path | None = None, *, quiet: bool = True
) -> Path:
    """Return the Python of a venv holding `verifiers==version`, building it when missing.

    The marker file is written only after pip succeeded, so an interrupted
    install is redone on the next run instead of being trusted.
    """
    root = root or cache_root() / f"{REFERENCE}-{version}"
    python = venv_python(root)
    marker = root / ".vfgym-bench-installed"
    wanted = f"{REFERENCE}=={version}"
    if python.exists() and marker.exists() and marker.read_text().strip() == wanted:
        return python
    print(f"[setup] building a venv for {wanted} at {root} (first run only)", file=sys.stderr)
    root.parent.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", wanted]
    if quiet:
        cmd.insert(4, "--quiet")
    proc = subprocess.run(cmd, capture_output=quiet, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-2000:] if quiet else ""
        raise ReferenceSetupError(
            f"`pip install {wanted}` failed in {root} (exit {proc.returncode}). Check that PyPI "
            f"is reachable, or point {CACHE_ENV_VAR} at a writable directory.\n{tail}"
        )
    check = subprocess.run(
        [str(python), "-c", f"import {REFERENCE}, sys; sys.stdout.write({REFERENCE}.__version__)"],
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        raise ReferenceSetupError(
            f"{wanted} installed but does not import in {root}:\n{check.stderr[-2000:]}"
        )
    marker.write_text(wanted + "\n")
    return python


if __name__ == "__main__":
    print(ensure_reference_venv(quiet=False))
