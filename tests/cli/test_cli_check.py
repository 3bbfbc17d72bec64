"""`vfgym check`: every built-in environment passes it, and each broken promise fails it.

The environments that break a promise are real modules written to a temp folder and
named by path, as an author names a module before packaging it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)

from vfgym.cli.check import run_check
from vfgym.envs.registry import describe, registered_names


def docker_usable() -> bool:
    return shutil.which("docker") is not None and (
        subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    )


def skip_without_docker(name: str) -> None:
    if docker_usable():
        return
    if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{name} needs Docker and VFGYM_REQUIRE_DOCKER=1, but Docker is not usable")
    pytest.skip(f"{name} needs Docker: start it with `sudo bash sandboxes/setup-docker.sh`")


@pytest.mark.parametrize("name", registered_names())
def test_every_builtin_environment_passes_check(name: str) -> None:
    info = describe(name)
    if info.distribution != "vfgym":
        pytest.skip(f"{name} comes from {info.distribution}, not vfgym")
    if info.needs_sandbox:
        skip_without_docker(name)
    report = run_check(name, num_examples=2)
    assert not report.failed, [r for r in report.results if r.outcome == "FAIL"]
    names = [result.name for result in report.results]
    assert "gymnasium check_env" in names and "same seed, same episode" in names
    assert ("no container left behind" in names) == info.needs_sandbox


GOOD_GAME = '''
"""A counting game: say the next number until ten."""
import random

import vfgym as vf

KIND = "game"
REWARD_RANGE = (0.0, 1.0)
{extra}


class Count(vf.MultiTurnEnv):
    def setup_state(self, state, **kwargs):
        state["said"] = 0
        return state

    def is_completed(self, messages, state, **kwargs):
        return state["said"] >= 3

    def env_response(self, messages, state, **kwargs):
        if messages[-1]["content"].strip() == str(state["said"] + 1):
            state["said"] += 1
        return [{{"role": "user", "content": {reply}}}], state

    def reference_policy(self, messages):
        said = sum(1 for m in messages if m["role"] == "assistant")
        return {{"role": "assistant", "content": str(said + 1)}}

    def make_random_policy(self, seed=0):
        rng = random.Random(seed)
        return lambda messages: {{"role": "assistant", "content": str(rng.randint(1, 3))}}


def reward(state):
    return {reward}


def load_environment(num_examples: int = 4):
    rows = [{{"question": "Count to three.", "answer": ""}} for _ in range(num_examples)]
    return Count(dataset=rows, rubric=vf.Rubric(funcs=[reward]), max_turns=6)
'''


def write_env(folder: Path, name: str, **parts: str) -> str:
    """A module `name`.py in `folder` from GOOD_GAME with `parts` changed; its path."""
    values = {"extra": "", "reply": '"ok"', "reward": '1.0 if state["said"] >= 3 else 0.0'}
    values.update(parts)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(GOOD_GAME.format(**values)))
    return str(path)


def failed(code_out: tuple[int, str, str]) -> list[str]:
    code, out, _ = code_out
    assert code == 1, out
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def test_a_good_environment_passes_by_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_env(tmp_path, "check_good_count")
    code, out, err = run(["check", path, "-n", "2"], capsys)
    assert code == 0, out + err
    assert out.count("\nok    ") == 6 and "every check passed" in out


def test_a_different_episode_for_the_same_seed_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    reply = 'f"ok ({random.random():.6f})"'  # unseeded: no two episodes alike
    path = write_env(tmp_path, "check_unseeded_count", reply=reply)
    lines = failed(run(["check", path, "-n", "1"], capsys))
    assert any("same seed, same episode" in line for line in lines)
    assert any("observation 1 differs" in line for line in lines)


def test_a_reference_that_does_not_solve_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_env(tmp_path, "check_unsolved_count", reward="0.5")
    (line,) = failed(run(["check", path, "-n", "2"], capsys))
    assert "reference policy solves" in line and "2 of 2 not solved" in line
    assert "example 0: reward 0.5" in line


def test_a_reference_that_promises_no_reward_is_only_checked_for_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_env(
        tmp_path, "check_unpromised_count", reward="0.5", extra="REFERENCE_REWARD = None"
    )
    code, out, _ = run(["check", path, "-n", "2"], capsys)
    assert code == 0, out
    assert "no reward promised): 0.5, 0.5" in out


def test_a_reward_outside_the_declared_range_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_env(tmp_path, "check_big_count", reward="3.0", extra="REFERENCE_REWARD = None")
    (line,) = failed(run(["check", path, "-n", "1"], capsys))
    assert "rewards finite and in range" in line and "outside [0, 1]" in line
    assert "REWARD_RANGE" in line


def test_a_nan_reward_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_env(
        tmp_path, "check_nan_count", reward='float("nan")', extra="REFERENCE_REWARD = None"
    )
    lines = failed(run(["check", path, "-n", "1"], capsys))
    assert any("reference policy" in line and "reward function" in line for line in lines)
    assert any("returned nan" in line for line in lines)


def test_a_malformed_declaration_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_env(tmp_path, "check_kind_count", extra='KIND = "puzzle"')
    (line,) = failed(run(["check", path, "-n", "1"], capsys))
    assert "describes itself" in line and "KIND is 'puzzle'" in line


def test_a_policy_that_raises_fails_its_check(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_env(tmp_path, "check_raising_count")
    source = (
        Path(path)
        .read_text()
        .replace("return lambda messages:", "return lambda messages: 1 / 0 or")
    )
    Path(path).write_text(source)
    lines = failed(run(["check", path, "-n", "1"], capsys))
    assert any("random policy" in line and "ZeroDivisionError" in line for line in lines)


def test_an_unknown_environment_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    code, _, err = run(["check", "guess-the-numbr"], capsys)
    assert code == 2 and "Did you mean: guess-the-number" in err
    code, _, err = run(["check", "guess-the-number", "-n", "0"], capsys)
    assert code == 2 and "-n/--num-examples must be at least 1" in err
