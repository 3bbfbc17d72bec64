"""A newcomer's first runs of `vfgym eval`, as the README's "The `vfgym` command" and
"Serve a model" sections describe them, and the mistakes a first run makes.

The model side is a real `ModelServer` on loopback, standing in for vLLM (which lists
the names it serves at GET /v1/models), talked to by the real openai client.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)
from held_import import vfgym_command

from vfgym.registry import load_environment
from vfgym.server import ModelServer


def _reference() -> object:
    return load_environment("guess-the-number", difficulty="easy").reference_policy


# ------------------------------------------------------- a model name the server lacks


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


# ------------------------------------------------------- Ctrl-C while loading

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


def _slow_eval(tmp_path: Path, args: list[str], interrupt: bool) -> subprocess.CompletedProcess:
    """`vfgym eval slow_env ARGS` in `tmp_path`; with `interrupt`, SIGINT (Ctrl-C) is sent
    while the environment loads, then the loader is let go."""
    modules = tmp_path / "modules"
    modules.mkdir(exist_ok=True)
    (modules / "slow_env.py").write_text(SLOW_ENV)
    environ = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(modules), environ.get("PYTHONPATH")]))
    loading, go = tmp_path / "loading", tmp_path / "go"
    environ.update(SLOW_ENV_LOADING=str(loading), SLOW_ENV_GO=str(go))
    loading.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    if not interrupt:
        go.touch()
    command = [*vfgym_command(), "eval", "slow_env", "-n", "2", "-r", "1", *args]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if interrupt:
            deadline = time.monotonic() + 120
            while not loading.exists():
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the loader never started"
                time.sleep(0.02)
            process.send_signal(signal.SIGINT)
            go.touch()  # a loader that ignores the interrupt would end by itself
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def test_ctrl_c_while_the_environment_loads_says_how_to_start_again(tmp_path: Path) -> None:
    """The README: Ctrl-C stopped before any rollout finished prints the command that
    starts the run again (-o DIR), and leaves nothing behind."""
    done = _slow_eval(tmp_path, ["-o", "run"], interrupt=True)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "Interrupted before any rollout started" in line, line
    assert "vfgym eval slow_env" in line and "-o run" in line, line
    assert not (tmp_path / "run").exists()


def test_ctrl_c_while_loading_for_a_resume_says_how_to_continue(tmp_path: Path) -> None:
    first = _slow_eval(tmp_path, ["-o", "run"], interrupt=False)
    assert first.returncode == 0, first.stderr
    before = {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()}
    done = _slow_eval(tmp_path, ["--resume", "run"], interrupt=True)
    assert done.returncode == 130, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "Interrupted before any rollout started" in line and "--resume run" in line, line
    assert {path.name: path.read_bytes() for path in (tmp_path / "run").iterdir()} == before


# ------------------------------------------------------- malformed -a


def test_malformed_env_args_show_an_environment_argument_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The example in the error is one of -a's own, not a sampling argument."""
    code, _, err = run(["eval", "guess-the-number", "-a", "{bad"], capsys)
    assert code == 2
    assert "-a/--env-args is not valid JSON" in err
    assert "temperature" not in err and '"difficulty"' in err
