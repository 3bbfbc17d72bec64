"""`vfgym eval` stopped by SIGTERM or by a cancellation of its task, not by Ctrl-C.

Either must end as Ctrl-C does: the finished rollouts kept, the command that continues
printed, a non-zero exit code (143 for SIGTERM, as shells report a process it ended;
130 for a cancellation) and no traceback. The model is a real `ModelServer` on
loopback whose policy holds a chosen rollout until the test releases it, so the stop
lands mid-run every time, however fast or slow the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runs import Gate, no_configured_model, run  # noqa: F401  (an autouse fixture)
from held_import import vfgym_command

from vfgym.cli.main import main
from vfgym.inference.server import ModelServer

EASY = '{"difficulty": "easy"}'

#: Lets a test cancel the task `vfgym eval` runs in, from outside it, once a go file
#: exists: the task asyncio.Runner runs is noted when it starts.
CANCEL_HOOK = """
import asyncio, os, threading, time

_run = asyncio.Runner.run


def run(self, coro, *, context=None):
    async def noted():
        task, loop = asyncio.current_task(), asyncio.get_running_loop()

        def cancel_on_go():
            while not os.path.exists(os.environ["VFGYM_TEST_CANCEL_GO"]):
                time.sleep(0.01)
            loop.call_soon_threadsafe(task.cancel)

        threading.Thread(target=cancel_on_go, daemon=True).start()
        return await coro

    return _run(self, noted(), context=context)


asyncio.Runner.run = run
"""


@pytest.fixture
def gate_at() -> Iterator[Callable[[int], tuple[ModelServer, Gate]]]:
    """`gate_at(n)`: a running model server whose policy holds the n-th rollout."""
    started: list[tuple[Any, Gate]] = []

    def start(hold: int) -> tuple[ModelServer, Gate]:
        gate = Gate(hold)
        running = ModelServer(gate).running()
        server = running.__enter__()
        started.append((running, gate))
        return server, gate

    yield start
    for running, gate in started:
        gate.release.set()
        running.__exit__(None, None, None)


def eval_args(server: ModelServer) -> list[str]:
    """Three rollouts, one at a time, against the gated server."""
    where = ["-b", server.base_url, "-m", "gated"]
    return ["eval", "guess-the-number", "-a", EASY, *where, "-n", "3", "-r", "1", "-c", "1"]


def child_environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(extra)
    return env


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the run to make progress")
        time.sleep(0.02)


def result_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stop_child(
    tmp_path: Path, args: list[str], ready: Callable[[], bool], stop: Callable[[Any], None]
) -> subprocess.CompletedProcess[str]:
    """Run `vfgym ARGS` in `tmp_path`, call `stop(process)` once `ready()`, and wait."""
    process = subprocess.Popen(
        [*vfgym_command(), *args],
        cwd=tmp_path,
        env=child_environ(**_hook_env(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: ready() or process.poll() is not None)
        assert process.poll() is None, process.communicate()[1]
        stop(process)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _hook_env(tmp_path: Path) -> dict[str, str]:
    """The cancel hook on the child's path; it does nothing until the go file exists."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(CANCEL_HOOK)
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "VFGYM_TEST_CANCEL_GO": str(tmp_path / "cancel")}


def check_quiet(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "CancelledError" not in result.stderr, result.stderr
    assert result.returncode == code, (result.returncode, result.stderr)


def test_sigterm_keeps_finished_rollouts_exits_143_and_resume_continues(
    gate_at, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, gate = gate_at(2)
    results = tmp_path / "run" / "results.jsonl"
    done = stop_child(
        tmp_path,
        [*eval_args(server), "-o", "run"],
        lambda: gate.blocked.is_set() and len(result_lines(results)) == 1,
        lambda process: process.send_signal(signal.SIGTERM),
    )
    check_quiet(done, 143)
    assert "Terminated (SIGTERM). 1 finished rollout(s) are kept in run" in done.stderr
    assert "--resume run" in done.stderr
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert metadata["status"] == "interrupted"

    gate.release.set()
    code, out, err = run([*eval_args(server), "--resume", "run"], capsys)
    assert code == 0, err
    assert "3 (0 errored" in out
    assert sorted(r["index"] for r in result_lines(results)) == [0, 1, 2]


def test_sigterm_before_any_rollout_finished_says_how_to_start_again(
    gate_at, tmp_path: Path
) -> None:
    server, gate = gate_at(1)
    done = stop_child(
        tmp_path,
        [*eval_args(server), "-o", "run"],
        gate.blocked.is_set,
        lambda process: process.send_signal(signal.SIGTERM),
    )
    check_quiet(done, 143)
    assert "Terminated (SIGTERM) before any rollout finished" in done.stderr
    assert "-o run" in done.stderr and "--resume" not in done.stderr


def test_a_cancelled_task_keeps_finished_rollouts_and_exits_130(gate_at, tmp_path: Path) -> None:
    server, gate = gate_at(2)
    results = tmp_path / "run" / "results.jsonl"
    done = stop_child(
        tmp_path,
        [*eval_args(server), "-o", "run"],
        lambda: gate.blocked.is_set() and len(result_lines(results)) == 1,
        lambda process: (tmp_path / "cancel").touch(),
    )
    check_quiet(done, 130)
    assert "Cancelled. 1 finished rollout(s) are kept in run" in done.stderr
    assert "--resume run" in done.stderr
    assert [r["index"] for r in result_lines(results)] == [0]


def test_sigterm_handler_is_installed_only_while_eval_runs_and_restored(
    gate_at, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In this process: a SIGTERM handler of the caller's own is set aside during the run
    (the run's SIGTERM stops the run, not the caller) and is back in place after it."""
    server, gate = gate_at(2)
    results = tmp_path / "run" / "results.jsonl"
    calls: list[int] = []

    def callers_handler(signum: int, frame: Any) -> None:
        calls.append(signum)
        gate.release.set()  # so that a run that ignored the signal still ends

    previous = signal.signal(signal.SIGTERM, callers_handler)
    try:

        def terminate_mid_run() -> None:
            wait_for(lambda: gate.blocked.is_set() and len(result_lines(results)) == 1)
            os.kill(os.getpid(), signal.SIGTERM)

        killer = threading.Thread(target=terminate_mid_run, daemon=True)
        killer.start()
        code = main([*eval_args(server), "-o", "run"])
        killer.join(timeout=10)
        assert signal.getsignal(signal.SIGTERM) is callers_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = capsys.readouterr().err
    assert code == 143, err
    assert calls == [] and "Terminated (SIGTERM)" in err
    assert [r["index"] for r in result_lines(results)] == [0]


def test_importing_the_command_installs_no_signal_handler() -> None:
    probe = (
        "import signal, vfgym.cli.main, vfgym.cli.eval, vfgym.cli._support\n"
        "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, signal.getsignal(15)\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
