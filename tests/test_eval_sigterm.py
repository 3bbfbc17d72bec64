"""`vfgym eval` stopped by SIGTERM while it starts up, before any rollout started.

Loading the environment can take long (a dataset, a model's tokenizer); a SIGTERM then
(a job scheduler, `kill`) must end the command as one during the rollouts does: exit
code 143, one line on stderr that says it stopped before any rollout started, no
traceback, and no results directory made (or, on --resume, the earlier run's files
left as they were, still resumable). The environment here is a module whose loader
waits for a go file, so the signal lands inside the loader every time.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from slow_loading import eval_while_loading


def _check_terminated_at_startup(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "SIGTERM" in lines[0] and "before any rollout started" in lines[0], lines[0]
    return lines[0]


def test_sigterm_while_the_environment_loads_exits_143_with_one_line(tmp_path: Path) -> None:
    done = eval_while_loading(tmp_path, ["-o", "run"], signal.SIGTERM)
    _check_terminated_at_startup(done)
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "outputs").exists()


def test_sigterm_while_loading_for_a_resume_leaves_the_run_resumable(tmp_path: Path) -> None:
    first = eval_while_loading(tmp_path, ["-o", "run"], None)
    assert first.returncode == 0, first.stderr
    run = tmp_path / "run"
    before = {path.name: path.read_bytes() for path in run.iterdir()}

    done = eval_while_loading(tmp_path, ["--resume", "run"], signal.SIGTERM)
    line = _check_terminated_at_startup(done)
    assert "--resume run" in line
    assert {path.name: path.read_bytes() for path in run.iterdir()} == before

    again = eval_while_loading(tmp_path, ["--resume", "run"], None)
    assert again.returncode == 0, again.stderr
