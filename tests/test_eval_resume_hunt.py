"""`vfgym eval` around `--resume`: the advice printed on Ctrl-C, and when a changed
dataset is refused.

Both run the real command against vfgym's own built-in model server, which
`vfgym eval` starts by itself when no model server is configured.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runs import no_configured_model, run  # noqa: F401  (an autouse fixture)

EASY = '{"difficulty": "easy"}'

# Runs first thing in the child (as its sitecustomize). When the command imports
# the module named in VFGYM_TEST_HOLD_IMPORT from inside its event loop (the
# built-in server's module, imported as the run starts it, before any result is
# written), the hook touches the marker and waits for the go file. The test sends
# SIGINT before it writes the go file, so the interrupt is taken at that point
# every time. It polls rather than sleeping once: the run's asyncio.Runner turns
# SIGINT into a cancellation of the run, which only lands at the run's next
# await, so a long sleep would simply go on after the signal.
HOOK = """
import importlib.abc, os, signal, sys, time

signal.signal(signal.SIGINT, signal.default_int_handler)


class _HoldImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != os.environ["VFGYM_TEST_HOLD_IMPORT"]:
            return None
        asyncio = sys.modules.get("asyncio")
        if asyncio is None or asyncio._get_running_loop() is None:
            return None  # not the import inside the run: let it be
        sys.meta_path.remove(self)
        open(os.environ["VFGYM_TEST_HOLD_MARKER"], "w").close()
        while not os.path.exists(os.environ["VFGYM_TEST_HOLD_GO"]):
            time.sleep(0.01)
        return None


sys.meta_path.insert(0, _HoldImport())
"""


def vfgym_command() -> list[str]:
    """The installed console script when there is one, else `python -m vfgym`."""
    script = Path(sys.executable).with_name("vfgym")
    return [str(script)] if script.exists() else [sys.executable, "-m", "vfgym"]


def interrupt_while_importing(
    tmp_path: Path, args: list[str], module: str
) -> subprocess.CompletedProcess[str]:
    """Run `vfgym ARGS` in `tmp_path`, press Ctrl-C while the run imports `module`, and wait."""
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    marker, go = tmp_path / "holding", tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")]))
    env.update(
        VFGYM_TEST_HOLD_IMPORT=module,
        VFGYM_TEST_HOLD_MARKER=str(marker),
        VFGYM_TEST_HOLD_GO=str(go),
    )
    process = subprocess.Popen(
        [*vfgym_command(), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), f"the run never imported {module}"
        process.send_signal(signal.SIGINT)
        go.touch()
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


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
    result = interrupt_while_importing(tmp_path, args, "vfgym.server")
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
