"""A newcomer's first runs of `vfgym eval`, as the README's "The `vfgym` command" and
"Serve a model" sections describe them, and the mistakes a first run makes.

The model side is a real `ModelServer` on loopback, standing in for vLLM (which lists
the names it serves at GET /v1/models), talked to by the real openai client.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)
from slow_loading import eval_while_loading

from vfgym.envs.registry import load_environment
from vfgym.inference.server import ModelServer


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


# ------------------------------------------------------- malformed -a


def test_malformed_env_args_show_an_environment_argument_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The example in the error is one of -a's own, not a sampling argument."""
    code, _, err = run(["eval", "guess-the-number", "-a", "{bad"], capsys)
    assert code == 2
    assert "-a/--env-args is not valid JSON" in err
    assert "temperature" not in err and '"difficulty"' in err
