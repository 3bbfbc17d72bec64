"""Ctrl-C while the `vfgym` command is still loading: exit 130, no traceback.

Each test starts the real command (`python -m vfgym` and the console script) in a
subprocess that holds one chosen import (`held_import`), so the interrupt lands
inside that import every time, however fast or slow the machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from held_import import interrupt_while_importing

CONSOLE_SCRIPT = Path(sys.executable).with_name("vfgym")
ENTRY_POINTS = {
    "python -m vfgym": [sys.executable, "-m", "vfgym"],
    "console script": [str(CONSOLE_SCRIPT)],
}


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
        (["list"], "vfgym.cli.eval"),  # what the command line parser needs
        (["sandbox", "doctor"], "vfgym.cli.sandbox"),  # a subcommand's own modules
    ],
)
def test_ctrl_c_while_the_command_loads_exits_130_quietly(
    tmp_path: Path, entry: str, args: list[str], module: str
) -> None:
    check_interrupted(interrupt_while_importing(tmp_path, [*entry_point(entry), *args], module))


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_ctrl_c_during_import_vfgym_exits_130_quietly(tmp_path: Path, entry: str) -> None:
    check_interrupted(interrupt_while_importing(tmp_path, [*entry_point(entry), "list"], "openai"))
