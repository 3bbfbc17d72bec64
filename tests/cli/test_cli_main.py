"""The `vfgym` command, run for real: in-process through `main()` and as a subprocess.

The model side is always a real HTTP server on loopback: the embedded reference
server `vfgym eval` starts by itself, or a `ModelServer` the test controls.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runs import Gate, no_configured_model, run  # noqa: F401  (an autouse fixture)

from vfgym.cli.main import main
from vfgym.inference.server import ModelServer

EASY = '{"difficulty": "easy"}'


def clean_environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(extra)
    return env


def vfgym_command() -> list[str]:
    """The installed console script when there is one, else `python -m vfgym.cli.main`."""
    script = Path(sys.executable).with_name("vfgym")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vfgym"]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------- plugins

PLUGIN_MODULES = {
    "vfgym_cli_broken_demo.py": 'raise ImportError("this demo module is broken on purpose")\n',
    "vfgym_cli_sandboxed_demo.py": (
        '"""A tool task whose code runs in a Docker sandbox (a test plugin)."""\n'
        'KIND = "tool"\n'
        "NEEDS_SANDBOX = True\n\n\n"
        "def load_environment():\n"
        '    raise AssertionError("must not be built when Docker is missing")\n'
    ),
}
ENTRY_POINTS = (
    "[vfgym.environments]\n"
    "broken-demo = vfgym_cli_broken_demo:load_environment\n"
    "sandboxed-demo = vfgym_cli_sandboxed_demo:load_environment\n"
)


@pytest.fixture
def plugins(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A third-party package on sys.path registering two environments by entry point."""
    root = tmp_path_factory.mktemp("plugins")
    dist = root / "vfgym_cli_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vfgym-cli-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    for name, text in PLUGIN_MODULES.items():
        (root / name).write_text(text)
    monkeypatch.syspath_prepend(str(root))
    return root


# ------------------------------------------------------------------ list


def test_list_shows_every_environment_and_survives_a_broken_package(
    plugins: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["list"], capsys)
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert rows["NAME"].split() == ["NAME", "KIND", "SANDBOX", "DESCRIPTION"]
    assert rows["guess-the-number"].split()[1:3] == ["game", "no"]
    assert "higher/lower hints" in rows["guess-the-number"]
    assert rows["sandboxed-demo"].split()[1:3] == ["tool", "yes"]
    assert "failed to import" in rows["broken-demo"]
    assert "broken on purpose" in rows["broken-demo"]
    assert "could not be imported" in out


# ------------------------------------------------------------------ eval


def test_eval_without_a_model_plays_the_reference_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["eval", "guess-the-number", "-n", "3", "-r", "2", "-a", EASY], capsys)
    assert code == 0, err
    assert "built-in server" in err and "`reference`" in err and "-b http" in err
    (run_dir,) = (tmp_path / "outputs" / "guess-the-number").glob("reference-*")
    records = lines(run_dir / "results.jsonl")
    assert sorted(r["index"] for r in records) == list(range(6))
    assert all(r["reward"] == 1.0 and not r.get("error") for r in records)
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["status"] == "complete" and metadata["model"] == "reference"
    # the summary table
    assert "guess-the-number · model reference · 3 examples x 2 rollouts" in out
    assert "6 (0 errored, 0 truncated)" in out
    assert "1.000 ± 0.000" in out
    assert any(line.split()[:2] == ["win", "1.000"] for line in out.splitlines())
    assert any(line.split()[:2] == ["pass@2", "1.000"] for line in out.splitlines())
    assert "completion tokens" in out and f"vfgym view {run_dir.relative_to(tmp_path)}" in out


def test_eval_random_policy_on_the_embedded_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["eval", "guess-the-number", "-m", "random", "-n", "2", "-r", "1", "-o", "run"], capsys
    )
    assert code == 0, err
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert metadata["model"] == "random"
    assert len(lines(tmp_path / "run" / "results.jsonl")) == 2
    assert "model random" in out


def test_resume_finishes_only_the_missing_rollouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["eval", "guess-the-number", "-n", "3", "-r", "1", "-a", EASY]
    assert run([*args, "-o", "run"], capsys)[0] == 0
    results = tmp_path / "run" / "results.jsonl"
    first = results.read_text().splitlines()[0]
    results.write_text(first + "\n")  # as if the run had stopped after one rollout
    code, out, err = run([*args, "--resume", "run"], capsys)
    assert code == 0, err
    kept = results.read_text().splitlines()
    assert kept[0] == first and len(kept) == 3  # the finished one was not redone
    assert sorted(r["index"] for r in lines(results)) == [0, 1, 2]
    assert "3 (0 errored" in out


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["-S", "{temperature: 0.7}"], "-S/--sampling-args is not valid JSON"),
        (["-a", '{"difficulty": "easy"'], "-a/--env-args is not valid JSON"),
        (["-a", "[1, 2]"], "-a/--env-args must be a JSON object"),
    ],
)
def test_malformed_json_names_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["eval", "guess-the-number", *argv], capsys)
    assert code == 2
    assert flag in err and "Traceback" not in err
    assert out == ""


def test_unknown_environment_suggests_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["eval", "guess-the-numbr"], capsys)
    assert code == 2
    assert "no environment named 'guess-the-numbr'" in err
    assert "Did you mean: guess-the-number" in err and "vfgym list" in err


def test_environment_arguments_it_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["eval", "guess-the-number", "-a", '{"colour": "red"}'], capsys)
    assert code == 2
    assert "refused its arguments" in err and "colour" in err and "difficulty" in err
    code, _, err = run(["eval", "guess-the-number", "-a", '{"difficulty": "extreme"}'], capsys)
    assert code == 2 and "difficulty must be one of" in err


def test_model_needs_a_server_when_none_is_configured(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["eval", "guess-the-number", "-m", "gpt-4.1-mini"], capsys)
    assert code == 2
    assert "only plays `-m reference` or `-m random`" in err and "-b http" in err


def test_api_key_without_model_asks_for_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    code, _, err = run(["eval", "guess-the-number", "-k", "MY_KEY"], capsys)
    assert code == 2 and "-m/--model" in err and "`-m reference`" in err
    # naming the reference policy still plays it on the built-in server, key or not
    code, out, err = run(
        ["eval", "guess-the-number", "-k", "MY_KEY", "-m", "reference", "-n", "1", "-r", "1"],
        capsys,
    )
    assert code == 0, err
    assert "No -b/--base-url and model `reference`" in err and "1.000 ± 0.000" in out


def test_output_directory_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "results.jsonl").write_text('{"index": 0}\n')
    code, _, err = run(["eval", "guess-the-number", "-o", "done"], capsys)
    assert code == 2 and "already holds results" in err and "--resume" in err
    code, _, err = run(["eval", "guess-the-number", "--resume"], capsys)
    assert code == 2 and "--resume needs the directory" in err
    code, _, err = run(["eval", "guess-the-number", "--resume", "nowhere"], capsys)
    assert code == 2 and "nothing to resume in nowhere" in err


def test_resume_refuses_a_different_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["eval", "guess-the-number", "-n", "1", "-r", "1", "-o", "run"], capsys)[0] == 0
    code, _, err = run(
        ["eval", "guess-the-number", "-n", "2", "-r", "1", "--resume", "run"], capsys
    )
    assert code == 2 and "cannot resume run" in err and "num_inputs" in err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_keeps_partial_results_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    code, out, err = run(
        ["eval", "guess-the-number", "-b", url, "-m", "m", "-n", "1", "-r", "1", "-o", "run"],
        capsys,
    )
    assert code == 1
    assert f"the model server at {url} was unreachable" in err
    assert "1 of 1 rollouts failed after retries" in err
    assert "kept in run" in err and "--resume run" in err and "Traceback" not in err
    (record,) = lines(tmp_path / "run" / "results.jsonl")
    assert record["error"]["type"] == "ModelCallError"
    assert "1 (1 errored" in out


def test_missing_docker_for_a_sandboxed_environment(
    plugins: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/vfgym-test/docker.sock")
    code, _, err = run(["eval", "sandboxed-demo"], capsys)
    assert code == 1
    assert "runs code in a Docker sandbox, but no Docker daemon answers" in err
    assert "sudo bash sandboxes/setup-docker.sh" in err and "vfgym sandbox doctor" in err
    assert "Traceback" not in err


def test_broken_environment_module_is_a_clear_error(
    plugins: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["eval", "broken-demo"], capsys)
    assert code == 1
    assert "'broken-demo' (vfgym_cli_broken_demo:load_environment) failed to import" in err
    assert "ImportError: this demo module is broken on purpose" in err


def test_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "eval" in out and "view" in out and "sandbox" in out
    code, _, err = run(["eval"], capsys)
    assert code == 2 and "env" in err
    code, _, err = run(["eval", "guess-the-number", "-n", "0"], capsys)
    assert code == 2 and "-n/--num-examples" in err


def test_sandbox_subcommand_delegates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["sandbox", "--help"], capsys)
    assert code == 0 and "doctor" in out and "gc" in out
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/vfgym-test/docker.sock")
    code, _, err = run(["sandbox", "gc", "--dry-run"], capsys)
    assert code == 1 and "cannot reach a Docker Engine" in err


def test_view_rejects_what_is_not_a_results_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["view", "missing"], capsys)
    assert code == 2 and "is not a directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(["view", "empty"], capsys)
    assert code == 2 and "holds no results.jsonl" in err


# ------------------------------------------------------------ subprocess


def test_console_script_evaluates_wordle_then_view_reports_it(tmp_path: Path) -> None:
    """The issue's check: no model configured, reward 1.0, and a report from the results."""
    env_id = "wordle"
    command = vfgym_command()
    done = subprocess.run(
        [*command, "eval", env_id, "-n", "3", "-r", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_environ(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "built-in server" in done.stderr
    (run_dir,) = (tmp_path / "outputs" / env_id).glob("reference-*")
    assert [r["reward"] for r in lines(run_dir / "results.jsonl")] == [1.0, 1.0, 1.0]
    assert "1.000 ± 0.000" in done.stdout
    assert main(["view", str(run_dir), "-o", "report.html"]) == 0
    html = (tmp_path / "report.html").read_text()
    assert html.count('class="rollout passed"') == 3 and env_id in html


@pytest.fixture
def gated_server() -> Iterator[tuple[ModelServer, Gate]]:
    policy = Gate(2)
    with ModelServer(policy).running() as server:
        try:
            yield server, policy
        finally:
            policy.release.set()


def wait_for(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the run to make progress")
        time.sleep(0.05)


def test_ctrl_c_keeps_finished_rollouts_and_resume_continues(
    gated_server: tuple[ModelServer, Gate],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, policy = gated_server
    args = ["eval", "guess-the-number", "-a", EASY, "-b", server.base_url, "-m", "gated"]
    args += ["-n", "3", "-r", "1", "-c", "1"]
    results = tmp_path / "run" / "results.jsonl"
    proc = subprocess.Popen(
        [*vfgym_command(), *args, "-o", "run"],
        cwd=tmp_path,
        env=clean_environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: policy.blocked.is_set() or proc.poll() is not None)
        wait_for(lambda: results.exists() and len(results.read_text().splitlines()) == 1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Interrupted. 1 finished rollout(s) are kept in run" in err
    assert "--resume run" in err and "Traceback" not in err
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert metadata["status"] == "interrupted"
    assert [r["index"] for r in lines(results)] == [0]

    policy.release.set()
    turns_before = policy.first_turns
    code, out, err = run([*args, "--resume", "run"], capsys)
    assert code == 0, err
    assert sorted(r["index"] for r in lines(results)) == [0, 1, 2]
    assert policy.first_turns - turns_before == 2  # rollout 0 was not played again
    assert "3 (0 errored" in out
