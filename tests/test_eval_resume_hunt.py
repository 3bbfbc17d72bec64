"""`vfgym eval` around `--resume`: the advice printed on Ctrl-C, and when a changed
dataset is refused.

Both run the real command against vfgym's own built-in model server, which
`vfgym eval` starts by itself when no model server is configured.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)
from held_import import interrupt_while_importing, vfgym_command

EASY = '{"difficulty": "easy"}'


def suggested_command(err: str) -> list[str]:
    """The command line the interrupted run printed for the user to run next."""
    lines = [line.strip() for line in err.splitlines() if line.strip().startswith("vfgym eval")]
    assert len(lines) == 1, err
    return shlex.split(lines[0])


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


# An environment found by module name whose rows come from a file in the working
# directory: rewriting the file changes the dataset while every setting (and so
# the whole command line) stays the same.
DATA_PLUGIN = "vfgym_resume_hunt_data"
DATA_PLUGIN_SOURCE = '''
"""guess-the-number with the seed written in ./hunt-seed.txt (a test plugin)."""
from pathlib import Path

from vfgym.games.guess_the_number import load_environment as guess_the_number


def load_environment():
    seed = int(Path("hunt-seed.txt").read_text())
    return guess_the_number(num_examples=2, seed=seed, difficulty="easy")
'''


@pytest.fixture
def data_plugin(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The plugin module on sys.path (dropped from sys.modules after the test); its env id."""
    root = tmp_path_factory.mktemp("resume-hunt-plugin")
    (root / f"{DATA_PLUGIN}.py").write_text(DATA_PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop(DATA_PLUGIN, None)  # each test imports its own copy
    try:
        yield DATA_PLUGIN.replace("_", "-")
    finally:
        sys.modules.pop(DATA_PLUGIN, None)


@pytest.mark.parametrize("metadata", ["kept", "moved aside"])
def test_changed_dataset_is_refused_before_the_built_in_server_starts(
    data_plugin: str, metadata: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resume over other rows than the run it continues is refused with the same
    message as ever, but before the built-in server starts (which announces itself
    on stderr with its address once it serves)."""
    args = ["eval", data_plugin, "-n", "2", "-r", "1"]
    (tmp_path / "hunt-seed.txt").write_text("0")
    code, _, err = run([*args, "-o", "run"], capsys)
    assert code == 0, err
    assert "built-in server at http://" in err  # what a started server prints
    if metadata == "moved aside":
        (tmp_path / "run" / "metadata.json").rename(tmp_path / "metadata.json.bak")
    before = (tmp_path / "run" / "results.jsonl").read_bytes()

    (tmp_path / "hunt-seed.txt").write_text("1")  # the dataset changes, the command does not
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
