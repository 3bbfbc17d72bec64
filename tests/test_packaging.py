"""A wheel install behaves like the editable one: same catalogue, no stray top-level names."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        cwd=out,
    )
    (built,) = out.glob("vfgym-*.whl")
    return built


def test_wheel_maps_games_and_sandboxes_under_vfgym(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level <= {"vfgym", *(n for n in top_level if n.endswith(".dist-info"))}
    assert "vfgym/games/guess_the_number.py" in names
    assert "vfgym/games/_base.py" in names
    assert "vfgym/sandboxes/__init__.py" in names
    # every source package of the repository is in the wheel
    for folder, package in (("vfgym", "vfgym"), ("games", "vfgym/games")):
        for source in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            relative = source.relative_to(ROOT / folder).as_posix()
            assert f"{package}/{relative}" in names, f"{source} is missing from the wheel"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[vfgym.environments]" in text and "wordle = vfgym.games.wordle:load_environment" in text


def test_wheel_in_a_fresh_venv_makes_an_environment(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    fresh_python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(fresh_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies come from this interpreter's site-packages through a plain path entry:
    # .pth files there (such as the editable install's finder) are not executed.
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            purelib,
            str(wheel),
        ],
        check=True,
    )
    script = (
        "import importlib.util, vfgym\n"
        f"assert vfgym.__file__.startswith({purelib!r}), vfgym.__file__\n"
        "assert importlib.util.find_spec('games') is None\n"
        "assert importlib.util.find_spec('sandboxes') is None\n"
        "env = vfgym.load_environment('guess-the-number', num_examples=2)\n"
        "print(type(env).__module__, len(env.dataset))\n"
    )
    result = subprocess.run(
        [str(fresh_python), "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["vfgym.games.guess_the_number", "2"]
