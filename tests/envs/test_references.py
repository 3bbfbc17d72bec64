"""Naming an environment by `module:function` or by a .py file, and how a module that
fails to import is reported (the same `EnvironmentImportError` everywhere)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vfgym
from vfgym.envs.registry import describe, find_loader, load_environment
from vfgym.errors import EnvironmentImportError, UnknownEnvironmentError

TOY = '''
"""A toy quiz from a folder that is not installed."""
from vfgym.envs import SingleTurnEnv

KIND = "tool"


def load_environment(size: int = 2):
    return SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": "a"} for i in range(size)])


def make_one():
    return load_environment(size=1)
'''


def write(folder: Path, relative: str, text: str = TOY) -> Path:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_path_to_a_file_builds_its_load_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "ref_toy_file.py")
    env = load_environment(str(path), size=3)
    assert len(env.get_dataset()) == 3 and env.env_id == str(path)
    assert len(load_environment(f"{path}:make_one").get_dataset()) == 1
    info = describe(str(path))
    assert (info.kind, info.gym_id) == ("tool", "vfgym/RefToyFile-v0")
    assert info.summary == "A toy quiz from a folder that is not installed."


def test_a_module_in_the_current_directory_needs_no_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "ref_games/__init__.py", "")
    write(tmp_path, "ref_games/quiz.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder it adds goes with the test
    env = vfgym.load_environment("ref_games.quiz:load_environment", size=2)
    assert len(env.get_dataset()) == 2
    assert find_loader("ref_games.quiz:make_one")().get_dataset()[0]["question"] == "q0"


@pytest.mark.parametrize(
    ("reference", "words"),
    [
        ("no_such_folder/quiz.py", "there is no file 'no_such_folder/quiz.py'"),
        ("ref_no_such_module:load_environment", "no module named 'ref_no_such_module'"),
        ("{path}:load_env", "has no 'load_env' (it has: load_environment, make_one)"),
        ("bad-name.py", "is not a name Python can import"),
    ],
)
def test_a_reference_to_nothing_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str, words: str
) -> None:
    path = write(tmp_path, "ref_toy_missing.py")
    write(tmp_path, "bad-name.py")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownEnvironmentError) as caught:
        load_environment(reference.format(path=path))
    assert words in str(caught.value)


def test_an_unknown_name_points_at_module_references() -> None:
    with pytest.raises(UnknownEnvironmentError, match="module:function"):
        load_environment("word-ladder-nowhere")


def test_a_file_that_fails_to_import_raises_its_error(tmp_path: Path) -> None:
    path = write(tmp_path, "ref_toy_broken.py", "import ref_frobnicate_missing\n")
    with pytest.raises(EnvironmentImportError) as caught:
        load_environment(str(path))
    message = str(caught.value)
    assert "failed to import" in message and "ref_frobnicate_missing" in message
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
    assert "ref_toy_broken" not in sys.modules  # a fixed file imports afresh
    with pytest.raises(EnvironmentImportError):
        describe(str(path))


def test_a_registered_module_that_fails_raises_the_same_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "ref_broken_plugin.py", "raise ImportError('missing dependency: frob')\n")
    dist = tmp_path / "ref_broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ref-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[vfgym.environments]\nref-broken = ref_broken_plugin:load_environment\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for call in (load_environment, describe, find_loader):
        with pytest.raises(EnvironmentImportError, match="missing dependency: frob") as caught:
            call("ref-broken")
        assert "'ref-broken' (ref_broken_plugin:load_environment) failed to import" in str(
            caught.value
        )


def test_a_hollow_vfgym_folder_is_named(tmp_path: Path) -> None:
    """A `vfgym/` folder with no __init__.py next to a script hides the installed package."""
    (tmp_path / "vfgym").mkdir()
    script = (
        "import vfgym\n"
        "if getattr(vfgym, '__file__', None): raise SystemExit(3)\n"
        "import vfgym.envs.registry as r\n"
        "r.registered_names()\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    if done.returncode == 3:
        pytest.skip("here the installed vfgym comes before the folder (not an editable install)")
    if "No module named 'vfgym.envs'" in done.stderr:
        pytest.skip("here the folder hides vfgym whole: no vfgym code runs to say so")
    assert done.returncode == 1
    assert "HollowPackageError" in done.stderr
    assert f"empty namespace package from {tmp_path / 'vfgym'}" in done.stderr
    assert "Run from another directory" in done.stderr
