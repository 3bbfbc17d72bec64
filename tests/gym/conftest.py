"""Fixtures of the Gym adapter tests: the test environments, registered and wrapped."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import pytest
from gym_test_envs import (
    CalculatorEnv,
    GuessEnv,
    QAEnv,
    load_async_guess,
    load_calculator,
    load_guess,
    load_qa,
)

import vfgym.gym as vgym

TEST_IDS = {
    "vfgym-test/Guess-v0": load_guess,
    "vfgym-test/AsyncGuess-v0": load_async_guess,
    "vfgym-test/Calculator-v0": load_calculator,
    "vfgym-test/QA-v0": load_qa,
}


@pytest.fixture(scope="session", autouse=True)
def _test_ids() -> Iterator[None]:
    for gym_id, loader in TEST_IDS.items():
        vgym.register(gym_id, loader)
    yield
    for gym_id in TEST_IDS:
        gym.registry.pop(gym_id, None)


@pytest.fixture
def guess() -> Iterator[vgym.GymEnv]:
    env = vgym.GymEnv(GuessEnv(), render_mode="ansi")
    yield env
    env.close()


@pytest.fixture
def calculator() -> Iterator[vgym.GymEnv]:
    env = vgym.GymEnv(CalculatorEnv())
    yield env
    env.close()


@pytest.fixture
def qa() -> Iterator[vgym.GymEnv]:
    env = vgym.GymEnv(QAEnv())
    yield env
    env.close()
