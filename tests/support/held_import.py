"""Press Ctrl-C on a `vfgym` command at a chosen import, in a subprocess.

The child gets a `sitecustomize` that holds one import: when the command reaches
that module (only inside a running event loop, with `in_loop`), the hook touches a
marker file and waits for a go file. The test sends SIGINT, then writes the go file,
so the interrupt lands at that point every time, however fast or slow the machine.
The hook polls rather than sleeping once: inside an event loop, asyncio's Runner
turns SIGINT into a cancellation that lands only at the run's next await.
SIGINT gets Python's usual handler in the child, as in a terminal: a child started
from a non-interactive shell's background job would inherit "ignore SIGINT".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HOOK = """
import importlib.abc, os, signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)


class _HoldImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != os.environ["VFGYM_TEST_HOLD_IMPORT"]:
            return None
        if os.environ.get("VFGYM_TEST_HOLD_IN_LOOP"):
            asyncio = sys.modules.get("asyncio")
            if asyncio is None or asyncio._get_running_loop() is None:
                return None  # not the import inside the run: let it be
        sys.meta_path.remove(self)
        open(os.environ["VFGYM_TEST_HOLD_MARKER"], "w").close()
        while not os.path.exists(os.environ["VFGYM_TEST_HOLD_GO"]):
            time.sleep(0.01)
        return None


sys.meta_path.insert(0, _HoldImport())
"""


def vfgym_command() -> list[str]:
    """The installed console script when there is one, else `python -m vfgym`."""
    script = Path(sys.executable).with_name("vfgym")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vfgym"]


def interrupt_while_importing(
    tmp_path: Path,
    command: list[str],
    module: str,
    *,
    in_loop: bool = False,
    drop_env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run `command` in `tmp_path`, press Ctrl-C while it imports `module`, and wait.

    `drop_env` names environment variables the child must not see."""
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    marker, go = tmp_path / "holding", tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
    env.update(
        VFGYM_TEST_HOLD_IMPORT=module,
        VFGYM_TEST_HOLD_MARKER=str(marker),
        VFGYM_TEST_HOLD_GO=str(go),
    )
    if in_loop:
        env["VFGYM_TEST_HOLD_IN_LOOP"] = "1"
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), f"the command never imported {module}"
        process.send_signal(signal.SIGINT)
        go.touch()
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)
