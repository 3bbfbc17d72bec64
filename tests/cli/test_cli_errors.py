"""`vfgym eval` / `vfgym view` given what a newcomer gets wrong: each mistake must end in
one clear sentence saying what to do, exit code 2 for a usage error, and no lost results.

Everything runs for real: `main()` in-process against the embedded reference server
on loopback, and a `ModelServer` the test starts where a configured server is needed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)

from vfgym.envs.registry import load_environment
from vfgym.inference.server import ModelServer
from vfgym.results.jsonl import (
    ResultsWriter,
)

ONE = ["-n", "1", "-r", "1"]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_clean_usage_error(code: int, err: str) -> None:
    assert code == 2, err
    assert "unexpected" not in err and "Traceback" not in err, err


def test_resume_with_other_sampling_args_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A changed -S is refused up front like any other change, not as an internal error."""
    assert run(["eval", "guess-the-number", *ONE, "-o", "run"], capsys)[0] == 0
    before = (tmp_path / "run" / "results.jsonl").read_text()
    code, _, err = run(
        ["eval", "guess-the-number", *ONE, "-S", '{"temperature": 0.5}', "--resume", "run"],
        capsys,
    )
    assert_clean_usage_error(code, err)
    assert "cannot resume run" in err and "sampling_args" in err
    assert "built-in server" not in err  # refused before any server started
    assert (tmp_path / "run" / "results.jsonl").read_text() == before


def test_resume_mismatch_names_the_flags_of_the_earlier_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--resume DIR` with the default -n/-r says which values continue that run."""
    args = ["eval", "guess-the-number", "-n", "2", "-r", "1", "-a", '{"difficulty": "easy"}']
    assert run([*args, "-o", "run"], capsys)[0] == 0
    code, _, err = run(["eval", "guess-the-number", "--resume", "run"], capsys)
    assert_clean_usage_error(code, err)
    assert "cannot resume run" in err
    assert "-n 2 -r 1" in err and """-a '{"difficulty":"easy"}'""" in err
    code, _, err = run([*args, "--resume", "run"], capsys)
    assert code == 0, err


def test_resume_with_unreadable_metadata_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metadata.json").write_text("{oops")
    code, _, err = run(["eval", "guess-the-number", "--resume", "run"], capsys)
    assert_clean_usage_error(code, err)
    assert "metadata.json" in err and "not valid JSON" in err


def test_output_dir_that_is_a_file_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("mine\n")
    for target in ("afile", "afile/sub"):
        code, _, err = run(["eval", "guess-the-number", *ONE, "-o", target], capsys)
        assert_clean_usage_error(code, err)
        assert f"-o/--output-dir {target}" in err and "choose another" in err
        assert "built-in server" not in err
    assert (tmp_path / "afile").read_text() == "mine\n"


@pytest.mark.parametrize(
    ("setting", "said"), [('{"stream": true}', "does not stream"), ('{"n": 3}', "eval -r 3")]
)
def test_sampling_args_no_rollout_can_run_with_are_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, said: str
) -> None:
    """Refused only at each request, every rollout errored, and the results written
    could be resumed only with the same -S, so the run could never complete."""
    code, _, err = run(["eval", "guess-the-number", *ONE, "-S", setting, "-o", "run"], capsys)
    assert_clean_usage_error(code, err)
    assert "-S/--sampling-args" in err and said in err
    assert "built-in server" not in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1:8000/v1", "ftp://host/v1"])
def test_base_url_without_http_scheme_is_refused(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without http:// the openai client can only fail to connect, after every retry."""
    code, _, err = run(["eval", "guess-the-number", *ONE, "-b", url, "-m", "m", "-o", "r"], capsys)
    assert_clean_usage_error(code, err)
    assert f"-b/--base-url {url!r} is not an http:// or https:// URL" in err
    if "://" not in url:
        assert f"-b http://{url}" in err


def test_base_url_from_the_environment_is_checked_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000/v1")
    code, _, err = run(["eval", "guess-the-number", *ONE, "-m", "m"], capsys)
    assert_clean_usage_error(code, err)
    assert "OPENAI_BASE_URL 'localhost:8000/v1' is not an http:// or https:// URL" in err


def test_a_404_from_a_base_url_without_v1_suggests_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = load_environment("guess-the-number", difficulty="easy")
    with ModelServer({"mine": env.reference_policy}).running() as server:
        root = server.base_url.removesuffix("/").removesuffix("/v1")
        code, _, err = run(
            ["eval", "guess-the-number", *ONE, "-b", root, "-m", "mine", "-o", "run"], capsys
        )
        assert code == 1
        assert f"-b {root}/v1" in err, err
        (record,) = lines(tmp_path / "run" / "results.jsonl")
        assert record["error"]
        code, _, err = run(
            ["eval", "guess-the-number", *ONE, "-b", f"{root}/v1", "-m", "mine", "-o", "ok"],
            capsys,
        )
        assert code == 0, err


def test_summary_of_a_resumed_run_says_the_time_is_this_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Resuming a finished run times only the resume; the summary must not pass it off
    as the run's duration."""
    args = ["eval", "guess-the-number", "-n", "2", "-r", "1"]
    code, first, _ = run([*args, "-o", "run"], capsys)
    assert code == 0 and "carried over" not in first
    code, again, err = run([*args, "--resume", "run"], capsys)
    assert code == 0, err
    (time_line,) = [line for line in again.splitlines() if line.startswith("time")]
    assert "this session" in time_line and "2 rollouts carried over" in time_line


def test_view_of_results_that_are_not_records_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.jsonl").write_text("[1, 2]\n")
    code, _, err = run(["view", "run"], capsys)
    assert code == 1 and "unexpected" not in err, err
    assert "results.jsonl" in err and "record 1;" in err
    (run_dir / "results.jsonl").write_text("")
    (run_dir / "metadata.json").write_text("[]")
    code, _, err = run(["view", "run"], capsys)
    assert code == 1 and "unexpected" not in err, err
    assert "metadata.json" in err


def test_view_refuses_a_negative_max_rollouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["eval", "guess-the-number", *ONE, "-o", "run"], capsys)[0] == 0
    code, _, err = run(["view", "run", "--max-rollouts", "-1"], capsys)
    assert_clean_usage_error(code, err)
    assert "--max-rollouts" in err
    assert not (tmp_path / "run" / "report.html").exists()


def test_view_hint_is_a_command_that_works_for_a_path_with_spaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["eval", "guess-the-number", *ONE, "-o", "my run"], capsys)
    assert code == 0, err
    assert "(HTML report: vfgym view 'my run')" in out


def test_ctrl_c_in_vfgym_sandbox_is_a_clean_interrupt(tmp_path: Path) -> None:
    """`vfgym sandbox ...` runs outside the other subcommands' handling; Ctrl-C there must
    still end with exit code 130 and a line saying so, not a traceback."""
    script = Path(sys.executable).with_name("vfgym")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "vfgym"]
    # A Docker endpoint that never answers: `doctor` waits on it until interrupted.
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(str(tmp_path / "docker.sock"))
        silent.listen()
        proc = subprocess.Popen(
            [*command, "sandbox", "--docker-host", f"unix://{tmp_path}/docker.sock", "doctor"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            silent.settimeout(120)
            connection, _ = silent.accept()  # the command is now waiting for Docker
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            connection.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "Traceback" not in err, err
    assert proc.returncode == 130 and "Interrupted" in err


@pytest.mark.parametrize("command", ["list", "eval", "play", "view"])
def test_every_subcommand_takes_the_v_the_unexpected_error_asks_for(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([command, "--help"], capsys)
    assert code == 0 and "-v, --verbose" in out


def test_unexpected_error_in_view_then_v_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error vfgym did not expect (here a renderer bug, stood in for by one that
    raises) is one line without -v, and its traceback with it."""
    import vfgym.results.report

    def broken(*args: object, **kwargs: object) -> str:
        raise ZeroDivisionError("a bug in the renderer")

    monkeypatch.setattr(vfgym.results.report, "render_report", broken)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.jsonl").write_text('{"index": 0, "reward": 1.0}\n')
    code, _, err = run(["view", "run"], capsys)
    assert code == 1 and "run with -v for the traceback" in err and "Traceback" not in err
    code, _, err = run(["view", "run", "-v"], capsys)
    assert code == 1 and "Traceback" in err and "run with -v" not in err


def test_eval_help_states_the_defaults_it_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """A newcomer reads the size of a bare `vfgym eval ENV` run off the help."""
    from vfgym.cli.main import _parser

    used = _parser().parse_args(["eval", "wordle"])
    code, out, _ = run(["eval", "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    for flag, value in (
        ("--num-examples NUM_EXAMPLES", used.num_examples),
        ("--rollouts-per-example ROLLOUTS_PER_EXAMPLE", used.rollouts_per_example),
        ("--max-concurrent MAX_CONCURRENT", used.max_concurrent),
    ):
        assert f"{flag} " in text and f"(default: {value}" in text.split(flag, 1)[1][:60]
    assert "OPENAI_BASE_URL" in text


def test_malformed_env_args_show_an_environment_argument_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The example in the error is one of -a's own, not a sampling argument."""
    code, _, err = run(["eval", "guess-the-number", "-a", "{bad"], capsys)
    assert code == 2
    assert "-a/--env-args is not valid JSON" in err
    assert "temperature" not in err and '"difficulty"' in err


def unwritable_directory(tmp_path: Path) -> Path:
    """A directory no run can write in, for whoever runs the tests (root included)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        return locked / "run"
    if not Path("/sys/kernel").is_dir():
        pytest.skip("running as root without /sys: no directory is unwritable")
    return Path("/sys/kernel/vfgym-test-run")


def test_eval_into_a_directory_another_run_is_writing_says_so(tmp_path, capsys) -> None:
    busy = tmp_path / "busy"
    with ResultsWriter(busy, {"model": "reference"}):
        code, _, err = run(
            ["eval", "guess-the-number", "-n", "1", "-r", "1", "-o", str(busy)], capsys
        )
    assert code == 2
    assert "another run is writing to" in err
    assert "unexpected" not in err


def test_eval_when_outputs_is_a_file_says_what_to_do(tmp_path, capsys) -> None:
    (tmp_path / "outputs").write_text("not a directory\n")
    code, _, err = run(["eval", "guess-the-number", "-n", "1", "-r", "1"], capsys)
    assert code == 2
    assert "outputs is a file" in err and "-o/--output-dir" in err
    assert "unexpected" not in err


def test_eval_into_an_unwritable_directory_says_what_to_do(tmp_path, capsys) -> None:
    target = unwritable_directory(tmp_path)
    code, _, err = run(
        ["eval", "guess-the-number", "-n", "1", "-r", "1", "-o", str(target)], capsys
    )
    assert code == 2
    assert f"cannot write results to {target}" in err
    assert "-o/--output-dir" in err
    assert "unexpected" not in err
