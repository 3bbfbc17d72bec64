"""Ctrl-C while the `vfgym` command is still loading: exit 130, no traceback.

Each test starts the real command (`python -m vfgym` and the console script) in a
subprocess whose `sitecustomize` holds one chosen import: when the command gets
to that module, the hook touches a marker file and sleeps. The test waits for the
marker and sends SIGINT then, so the interrupt lands inside that import every
time, however fast or slow the machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Runs first thing in the child. SIGINT gets Python's usual handler, as in a
# terminal: a child started from a non-interactive shell's background job would
# inherit "ignore SIGINT" and never see the interrupt.
HOOK = """
import importlib.abc, os, signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)


class _HoldImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["VFGYM_TEST_HOLD_IMPORT"]:
            sys.meta_path.remove(self)
            open(os.environ["VFGYM_TEST_HOLD_MARKER"], "w").close()
            time.sleep(60)
        return None


sys.meta_path.insert(0, _HoldImport())
"""

CONSOLE_SCRIPT = Path(sys.executable).with_name("vfgym")
ENTRY_POINTS = {
    "python -m vfgym": [sys.executable, "-m", "vfgym"],
    "console script": [str(CONSOLE_SCRIPT)],
}


def interrupt_during_import(
    tmp_path: Path, entry: list[str], args: list[str], module: str
) -> subprocess.CompletedProcess[str]:
    """Run `entry + args`, send SIGINT while `module` is being imported, and wait."""
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    marker = tmp_path / "importing"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
    env["VFGYM_TEST_HOLD_IMPORT"] = module
    env["VFGYM_TEST_HOLD_MARKER"] = str(marker)
    process = subprocess.Popen(
        [*entry, *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), f"the command never imported {module}"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def entry_point(name: str) -> list[str]:
    if name == "console script" and not CONSOLE_SCRIPT.exists():
        pytest.skip(f"no console script at {CONSOLE_SCRIPT}")
    return ENTRY_POINTS[name]


def check_interrupted(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "KeyboardInterrupt" not in result.stderr, result.stderr
    assert result.returncode == 130, (result.returncode, result.stderr)
    assert result.stderr.strip() == "Interrupted."


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["list"], "vfgym.eval_command"),  # what the command line parser needs
        (["sandbox", "doctor"], "vfgym.sandbox.cli"),  # a subcommand's own modules
    ],
)
def test_ctrl_c_while_the_command_loads_exits_130_quietly(
    tmp_path: Path, entry: str, args: list[str], module: str
) -> None:
    check_interrupted(interrupt_during_import(tmp_path, entry_point(entry), args, module))


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_ctrl_c_during_import_vfgym_exits_130_quietly(tmp_path: Path, entry: str) -> None:
    check_interrupted(interrupt_during_import(tmp_path, entry_point(entry), ["list"], "openai"))
