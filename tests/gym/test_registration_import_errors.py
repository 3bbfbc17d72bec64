"""`gym.make` of an id whose environment fails to import raises with the module's own
error (`EnvironmentImportError`), as `vfgym list`, `vfgym eval` and `load_environment` do,
never Gymnasium's `NameNotFound`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

import vfgym.gym as vgym
from vfgym.errors import EnvironmentImportError

BROKEN_ID = "vfgym/RegBrokenDemo-v0"


@pytest.fixture
def broken_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed package whose environment module raises on import."""
    (tmp_path / "reg_broken_demo.py").write_text(
        "raise ImportError('this demo needs frobnicate, which is not installed')\n"
    )
    dist = tmp_path / "reg_broken_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: reg-broken-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[vfgym.environments]\nreg-broken-demo = reg_broken_demo:load_environment\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield
    finally:
        gym.registry.pop(BROKEN_ID, None)


def test_make_of_a_broken_environment_raises_its_import_error(broken_plugin: None) -> None:
    registered, skipped = vgym.register_registry()
    assert "reg-broken-demo" not in registered
    assert "frobnicate" in skipped["reg-broken-demo"]
    assert "guess-the-number" in registered  # one broken package hides nothing else
    with pytest.raises(EnvironmentImportError, match="needs frobnicate") as caught:
        gym.make(BROKEN_ID)
    assert "'reg-broken-demo' (reg_broken_demo:load_environment) failed to import" in str(
        caught.value
    )
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_fixed_module_makes_under_the_same_id(broken_plugin: None, tmp_path: Path) -> None:
    vgym.register_registry()
    (tmp_path / "reg_broken_demo.py").write_text(
        "from vfgym.envs import SingleTurnEnv\n\n\n"
        "def load_environment():\n"
        "    return SingleTurnEnv(dataset=[{'question': 'q', 'answer': 'a'}])\n"
    )
    env = gym.make(BROKEN_ID)  # the id registered while it was broken makes it once fixed
    try:
        assert isinstance(env.unwrapped, vgym.GymEnv)
        assert env.reset(seed=0)[0] == "q"
    finally:
        env.close()


def test_an_id_can_name_a_python_file(tmp_path: Path) -> None:
    """`register(id, "path/to/game.py:function")`: the registry builds it, as it builds
    a name, and a broken file is refused when registered, with its own error."""
    (tmp_path / "reg_file_quiz.py").write_text(
        "from vfgym.envs import SingleTurnEnv\n\n\n"
        "def make_quiz(size=1):\n"
        "    rows = [{'question': f'q{i}', 'answer': 'a'} for i in range(size)]\n"
        "    return SingleTurnEnv(dataset=rows)\n"
    )
    spec = vgym.register(
        "reg-test/FileQuiz-v0", f"{tmp_path / 'reg_file_quiz.py'}:make_quiz", size=2
    )
    try:
        env = gym.make(spec.id)
        try:
            assert len(env.unwrapped.rows) == 2
        finally:
            env.close()
    finally:
        gym.registry.pop(spec.id, None)
    (tmp_path / "reg_file_broken.py").write_text("import reg_frobnicate_missing\n")
    with pytest.raises(EnvironmentImportError, match="reg_frobnicate_missing"):
        vgym.register("reg-test/FileBroken-v0", str(tmp_path / "reg_file_broken.py"))
    assert gym.registry.get("reg-test/FileBroken-v0") is None
