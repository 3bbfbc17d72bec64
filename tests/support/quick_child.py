"""Run code that must end at once in a fresh interpreter, so a hang fails one test
instead of stalling the whole run."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

# Starting an interpreter and importing vfgym is not what such a test measures, and on
# a loaded machine it alone can take many seconds: it gets this much on its own.
STARTUP_SECONDS = 300.0


def finishes_quickly(setup: str, code: str, seconds: float = 10.0) -> str:
    """Run `setup` (imports), then `code` under a SIGALRM deadline of `seconds`, in a
    fresh interpreter; return its stdout, failing the test if `code` does not end in time
    or fails."""
    script = "\n".join(
        [
            textwrap.dedent(setup),
            "import signal",
            f"signal.alarm({math.ceil(seconds)})",
            textwrap.dedent(code),
        ]
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=STARTUP_SECONDS + seconds,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {STARTUP_SECONDS + seconds} s: {code.strip()}")
    if done.returncode == -14:  # SIGALRM: the deadline passed
        pytest.fail(f"still running after {seconds} s: {code.strip()}")
    assert done.returncode == 0, done.stderr
    return done.stdout
