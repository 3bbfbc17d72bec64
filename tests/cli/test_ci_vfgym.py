"""`bash .ci/vfgym ...`: set up, then run the command, showing only setup's one-line
progress messages (all of its output when it fails), and no pip run when nothing changed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def checkout_with(tmp_path: Path, setup: str) -> Path:
    """A folder laid out like a checkout: the real .ci/vfgym, a `.ci/setup` that runs
    `setup`, and a `.venv/bin/vfgym` that echoes its arguments."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "vfgym", tmp_path / ".ci" / "vfgym")
    (tmp_path / ".ci" / "setup").write_text(f"#!/usr/bin/env bash\n{setup}\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vfgym").write_text('#!/usr/bin/env bash\necho "vfgym ran with: $*"\n')
    (bin_dir / "vfgym").chmod(0o755)
    return tmp_path


def ci_vfgym(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(checkout / ".ci" / "vfgym"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


NOISY_SETUP = """
echo "setup: installing vfgym and its dependencies into .venv (a few minutes the first time)" >&2
echo "WARNING: Package 'vfgym.games.data' is absent from the packages configuration." >&2
echo "Successfully installed 42 packages"
echo "building vfgym-sandbox-python:abc on vfgym-sandbox-base:def" >&2
echo "vfgym-sandbox-python:abc is up to date"
"""


def test_only_progress_lines_of_setup_are_shown(tmp_path: Path) -> None:
    done = ci_vfgym(checkout_with(tmp_path, NOISY_SETUP), "list", "-v")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "vfgym ran with: list -v\n"
    assert done.stderr.splitlines() == [
        "setup: installing vfgym and its dependencies into .venv (a few minutes the first time)",
        "building vfgym-sandbox-python:abc on vfgym-sandbox-base:def",
    ]


def test_a_failed_setup_shows_all_its_output_and_stops(tmp_path: Path) -> None:
    done = ci_vfgym(
        checkout_with(tmp_path, NOISY_SETUP + "echo 'pip: no such package' >&2\nexit 3")
    )
    assert done.returncode == 3
    assert "vfgym ran with" not in done.stdout
    assert "WARNING: Package 'vfgym.games.data'" in done.stderr
    assert "pip: no such package" in done.stderr
    assert done.stderr.rstrip().endswith("its whole output is above")


def test_nothing_but_the_output_when_nothing_changed() -> None:
    """The real setup of this checkout, once it has run: no pip, no chatter."""
    stamp = ROOT / ".venv" / ".vfgym-installed"
    if not stamp.is_file() or Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("needs this checkout's .venv set up by `bash .ci/setup` (as CI does)")
    done = ci_vfgym(ROOT, "list")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert any(line.startswith("guess-the-number ") for line in done.stdout.splitlines())
