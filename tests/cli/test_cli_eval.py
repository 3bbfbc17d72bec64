"""`vfgym eval` stopped and started again: SIGTERM or a cancelled task ends a run as Ctrl-C
does (finished rollouts kept, the command that continues printed, a non-zero exit code),
Ctrl-C while the environment loads says how to start again, a resume whose data changed
is refused before the built-in server starts; and runs refused before they start: a
model name the server does not serve, a run too large to hold."""

from __future__ import annotations

import json
import os
import shlex
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
from held_import import interrupt_while_importing, vfgym_command
from slow_loading import eval_while_loading

from vfgym.cli.main import main
from vfgym.envs.registry import load_environment
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

    main_returned = threading.Event()

    def terminate_mid_run() -> None:
        # Never once the run is over: the signal would then reach the test process itself.
        wait_for(
            lambda: (
                main_returned.is_set()
                or (gate.blocked.is_set() and len(result_lines(results)) == 1)
            )
        )
        if not main_returned.is_set():
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, callers_handler)
    killer = threading.Thread(target=terminate_mid_run, daemon=True)
    try:
        killer.start()
        try:
            code = main([*eval_args(server), "-o", "run"])
        finally:
            main_returned.set()
            killer.join(timeout=130)
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


def _reference() -> object:
    return load_environment("guess-the-number", difficulty="easy").reference_policy


def test_a_model_name_the_server_does_not_serve_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-m Qwen3-8B` for a server started as `vllm serve Qwen/Qwen3-8B`: every rollout
    would get a 404, and the results directory could only be resumed with the same
    wrong name. It is refused at once, with the names the server serves."""
    with ModelServer({"Qwen/Qwen3-8B": _reference()}).running() as server:
        argv = ["eval", "guess-the-number", "-b", server.base_url, "-m", "Qwen3-8B"]
        code, out, err = run([*argv, "-n", "1", "-r", "1", "-o", "run"], capsys)
        assert server.requests == []  # no rollout reached the server
    assert code == 2, err
    assert "does not serve a model named 'Qwen3-8B'" in err
    assert "Did you mean 'Qwen/Qwen3-8B'?" in err and "-m" in err
    assert "Traceback" not in err and out == ""
    assert not (tmp_path / "run").exists()


def test_a_served_model_name_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ModelServer({"Qwen/Qwen3-8B": _reference(), "other": _reference()}).running() as server:
        argv = ["eval", "guess-the-number", "-b", server.base_url, "-m", "Qwen/Qwen3-8B"]
        code, out, err = run([*argv, "-n", "1", "-r", "1", "-o", "run"], capsys)
    assert code == 0, err
    assert "rollouts  1 (0 errored" in out


def test_a_name_the_list_lacks_but_the_server_retrieves_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Some servers answer for names they do not list (Ollama's `llama3` for the listed
    `llama3:latest`; vfgym's single-policy server for any name): the model's own
    GET /v1/models/NAME decides, so such a name is not refused."""
    with ModelServer(_reference(), model_name="listed").running() as server:
        argv = ["eval", "guess-the-number", "-b", server.base_url, "-m", "unlisted"]
        code, out, err = run([*argv, "-n", "1", "-r", "1", "-o", "run"], capsys)
    assert code == 0, err
    assert "rollouts  1 (0 errored" in out


def test_ctrl_c_while_the_environment_loads_says_how_to_start_again(tmp_path: Path) -> None:
    """The README: Ctrl-C stopped before any rollout finished prints the command that
    starts the run again (-o DIR), and leaves nothing behind."""
    done = eval_while_loading(tmp_path, ["-o", "run"], signal.SIGINT)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "Interrupted before any rollout started" in line, line
    assert "vfgym eval slow_env" in line and "-o run" in line, line
    assert not (tmp_path / "run").exists()


def test_ctrl_c_while_loading_for_a_resume_says_how_to_continue(tmp_path: Path) -> None:
    first = eval_while_loading(tmp_path, ["-o", "run"], None)
    assert first.returncode == 0, first.stderr
    before = {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()}
    done = eval_while_loading(tmp_path, ["--resume", "run"], signal.SIGINT)
    assert done.returncode == 130, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "Interrupted before any rollout started" in line and "--resume run" in line, line
    assert {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()} == before


def test_a_run_too_large_to_hold_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-r 100000000000000` (a slip of the finger) asks for 5e14 rollouts, every one of
    them an input row built up front: the process ran out of memory and was killed
    (exit 137) with nothing said. It is refused at once, saying how many it asked for."""
    code, out, err = run(
        ["eval", "guess-the-number", "-n", "5", "-r", "100000000000000", "-o", "big"], capsys
    )
    assert code == 2, err
    assert "500,000,000,000,000 rollouts" in err
    assert "-r/--rollouts-per-example" in err and "-n/--num-examples" in err
    assert not (tmp_path / "big").exists()
    assert out == ""


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


def suggested_command(err: str) -> list[str]:
    """The command line the interrupted run printed for the user to run next."""
    lines = [line.strip() for line in err.splitlines() if line.strip().startswith("vfgym eval")]
    assert len(lines) == 1, err
    return shlex.split(lines[0])


# An environment found by module name whose rows come from a file in the working
# directory: rewriting the file changes the dataset while every setting (and so
# the whole command line) stays the same.
DATA_PLUGIN = "vfgym_resume_data"


DATA_PLUGIN_SOURCE = '''
"""guess-the-number with the seed written in ./plugin-seed.txt (a test plugin)."""
from pathlib import Path

from vfgym.games.guess_the_number import load_environment as guess_the_number


def load_environment():
    seed = int(Path("plugin-seed.txt").read_text())
    return guess_the_number(num_examples=2, seed=seed, difficulty="easy")
'''


@pytest.fixture
def data_plugin(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The plugin module on sys.path (dropped from sys.modules after the test); its env id."""
    root = tmp_path_factory.mktemp("resume-plugin")
    (root / f"{DATA_PLUGIN}.py").write_text(DATA_PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop(DATA_PLUGIN, None)  # each test imports its own copy
    try:
        yield DATA_PLUGIN.replace("_", "-")
    finally:
        sys.modules.pop(DATA_PLUGIN, None)


def test_ctrl_c_before_anything_is_written_prints_a_command_that_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the built-in server starts leaves no results and no metadata; the
    command printed then must be one the user can run, not a `--resume` it refuses."""
    args = ["eval", "guess-the-number", "-a", EASY, "-n", "2", "-r", "1", "-o", "run"]
    result = interrupt_while_importing(
        tmp_path,
        [*vfgym_command(), *args],
        "vfgym.inference.server",
        in_loop=True,
        drop_env=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    )
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "built-in server at" not in result.stderr  # it was stopped before serving
    assert not (tmp_path / "run" / "results.jsonl").exists()
    assert not (tmp_path / "run" / "metadata.json").exists()

    again = suggested_command(result.stderr)
    code, out, err = run(again[1:], capsys)
    assert code == 0, err
    assert "2 (0 errored" in out
    records = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["index"] for line in records) == [0, 1]


@pytest.mark.parametrize("metadata", ["kept", "moved aside"])
def test_changed_dataset_is_refused_before_the_built_in_server_starts(
    data_plugin: str, metadata: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resume over other rows than the run it continues is refused with the same
    message as ever, but before the built-in server starts (which announces itself
    on stderr with its address once it serves)."""
    args = ["eval", data_plugin, "-n", "2", "-r", "1"]
    (tmp_path / "plugin-seed.txt").write_text("0")
    code, _, err = run([*args, "-o", "run"], capsys)
    assert code == 0, err
    assert "built-in server at http://" in err  # what a started server prints
    if metadata == "moved aside":
        (tmp_path / "run" / "metadata.json").rename(tmp_path / "metadata.json.bak")
    before = (tmp_path / "run" / "results.jsonl").read_bytes()

    (tmp_path / "plugin-seed.txt").write_text("1")  # the dataset changes, the command does not
    code, out, err = run([*args, "--resume", "run"], capsys)
    assert code == 2, err
    assert out == ""
    assert "cannot resume run" in err and "Traceback" not in err
    if metadata == "kept":
        assert "it was run with inputs_digest=" in err and "use another output directory" in err
        assert "continue it with the settings it was started with:" not in err
    else:
        assert "so it comes from another run" in err
    assert "built-in server" not in err and "http://" not in err
    assert (tmp_path / "run" / "results.jsonl").read_bytes() == before
