"""`benchmarks/episode_phases.py` keeps measuring what the README says it measures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "episode_phases.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("episode_phases", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_phase_is_timed_over_gems_version_of_the_game() -> None:
    phases = load_script()
    env, move = phases.make_env("vfgym", scoring=True)
    try:
        env.reset(seed=0)
        figures = phases.one_round(env, move, 300)
    finally:
        env.close()
    assert all(figures[phase] > 0.0 for phase in phases.PHASES), figures
    # 1-50 in 7 turns, guesses from 1 to 10: most episodes run to the turn limit.
    assert 5.0 < figures["steps per episode"] <= 7.0, figures


def test_no_scoring_leaves_the_episode_unscored() -> None:
    phases = load_script()
    env, move = phases.make_env("vfgym", scoring=False)
    try:
        env.reset(seed=0)
        env.unwrapped._state["game_state"]["target"] = 1
        *_, info = env.step(move(1))  # found: a won episode ends
    finally:
        env.close()
    assert info["stop_reason"] is not None and info["episode_reward"] == 0.0
    assert info["metrics"] == {}


def test_an_unknown_framework_is_refused() -> None:
    phases = load_script()
    with pytest.raises(SystemExit, match="vfgym or gem"):
        phases.make_env("textarena", scoring=True)


def test_no_scoring_is_vfgym_only(monkeypatch: pytest.MonkeyPatch) -> None:
    phases = load_script()
    monkeypatch.setattr(sys, "argv", ["episode_phases.py", "gem", "--no-scoring"])
    with pytest.raises(SystemExit, match="vfgym only"):
        phases.main()
