"""`vfgym eval` stopped by SIGTERM while it starts up, before any rollout started.

Loading the environment can take long (a dataset, a model's tokenizer); a SIGTERM then
(a job scheduler, `kill`) must end the command as one during the rollouts does: exit
code 143, one line on stderr that says it stopped before any rollout started, no
traceback, and no results directory made (or, on --resume, the earlier run's files
left as they were, still resumable). The environment here is a module whose loader
waits for a go file, so the signal lands inside the loader every time.
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


def _environ(tmp_path: Path) -> dict[str, str]:
    modules = tmp_path / "modules"
    modules.mkdir(exist_ok=True)
    (modules / "slow_env.py").write_text(SLOW_ENV)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(modules), env.get("PYTHONPATH")]))
    env["SLOW_ENV_LOADING"] = str(tmp_path / "loading")
    env["SLOW_ENV_GO"] = str(tmp_path / "go")
    return env


def _eval(tmp_path: Path, args: list[str], sigterm: bool) -> subprocess.CompletedProcess[str]:
    """`vfgym eval slow_env ARGS` in `tmp_path`; with `sigterm`, sent while it loads."""
    (tmp_path / "loading").unlink(missing_ok=True)
    go = tmp_path / "go"
    if sigterm:
        go.unlink(missing_ok=True)
    else:
        go.touch()
    command = [*vfgym_command(), "eval", "slow_env", "-n", "2", "-r", "1", *args]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=_environ(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if sigterm:
            deadline = time.monotonic() + 120
            while not (tmp_path / "loading").exists():
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the loader never started"
                time.sleep(0.02)
            process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _check_terminated_at_startup(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "SIGTERM" in lines[0] and "before any rollout started" in lines[0], lines[0]
    return lines[0]


def test_sigterm_while_the_environment_loads_exits_143_with_one_line(tmp_path: Path) -> None:
    done = _eval(tmp_path, ["-o", "run"], sigterm=True)
    _check_terminated_at_startup(done)
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "outputs").exists()


def test_sigterm_while_loading_for_a_resume_leaves_the_run_resumable(tmp_path: Path) -> None:
    first = _eval(tmp_path, ["-o", "run"], sigterm=False)
    assert first.returncode == 0, first.stderr
    run = tmp_path / "run"
    before = {path.name: path.read_bytes() for path in run.iterdir()}

    done = _eval(tmp_path, ["--resume", "run"], sigterm=True)
    line = _check_terminated_at_startup(done)
    assert "--resume run" in line
    assert {path.name: path.read_bytes() for path in run.iterdir()} == before

    again = _eval(tmp_path, ["--resume", "run"], sigterm=False)
    assert again.returncode == 0, again.stderr
