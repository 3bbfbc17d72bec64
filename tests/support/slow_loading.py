"""`vfgym eval` of an environment whose loader waits, so a signal lands in start-up.

The environment is a module written into the test's directory: its loader marks
that it has started, then waits for a go file. `eval_while_loading` sends a signal
once the loader has started (then lets it go, so a loader that ignores the signal
still ends), or none, and returns the finished command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from held_import import vfgym_command

SLOW_ENV = '''
import os, time
from pathlib import Path

import vfgym


def load_environment(**kwargs):
    """guess-the-number, once the test's go file exists."""
    Path(os.environ["SLOW_ENV_LOADING"]).touch()
    while not Path(os.environ["SLOW_ENV_GO"]).exists():
        time.sleep(0.01)
    return vfgym.load_environment("guess-the-number", difficulty="easy")
'''


def slow_env_environ(tmp_path: Path) -> dict[str, str]:
    """The process environment that finds `slow_env` and its two files in `tmp_path`,
    with no model server configured."""
    modules = tmp_path / "modules"
    modules.mkdir(exist_ok=True)
    (modules / "slow_env.py").write_text(SLOW_ENV)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(modules), env.get("PYTHONPATH")]))
    env["SLOW_ENV_LOADING"] = str(tmp_path / "loading")
    env["SLOW_ENV_GO"] = str(tmp_path / "go")
    return env


def eval_while_loading(
    tmp_path: Path, args: list[str], send: signal.Signals | None
) -> subprocess.CompletedProcess[str]:
    """`vfgym eval slow_env -n 2 -r 1 ARGS` in `tmp_path`; `send` (SIGTERM, SIGINT) is
    sent while the environment loads, or nothing with None."""
    loading, go = tmp_path / "loading", tmp_path / "go"
    loading.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    if send is None:
        go.touch()
    command = [*vfgym_command(), "eval", "slow_env", "-n", "2", "-r", "1", *args]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=slow_env_environ(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if send is not None:
            deadline = time.monotonic() + 120
            while not loading.exists():
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the loader never started"
                time.sleep(0.02)
            process.send_signal(send)
            go.touch()  # a loader that ignores the signal ends by itself
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)
