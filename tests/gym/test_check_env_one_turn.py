"""Gymnasium's unmodified `check_env` on vfgym envs whose episodes last one turn.

An episode that ends naturally after one turn (a SingleTurnEnv: one question, one
answer) is terminated, and `check_env` passes. An episode cut by a turn limit of one
(`max_turns=1` on a multi-turn game) is truncated, as every time limit is in
Gymnasium; `check_env` assumes no env truncates after one step and refuses it exactly
as it refuses Gymnasium's own `TimeLimit(max_episode_steps=1)`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import gymnasium as gym
import pytest
from gym_test_envs import completion_sum_env, load_qa
from gymnasium.utils.env_checker import check_env

import vfgym.gym as vgym
from vfgym.envs import SingleTurnEnv

QA_ID = "vfgym-test/OneTurnQA-v0"
SUM_ID = "vfgym-test/OneTurnSum-v0"


def load_sum() -> SingleTurnEnv:
    return completion_sum_env()


@pytest.fixture(scope="module", autouse=True)
def _one_turn_ids() -> Iterator[None]:
    vgym.register(QA_ID, load_qa, max_turns=1)
    vgym.register(SUM_ID, load_sum)
    yield
    for gym_id in (QA_ID, SUM_ID):
        gym.registry.pop(gym_id, None)


def _check_env_verdict(env: gym.Env) -> str | None:
    """What `check_env` refuses the env for (its assertion's text), or None if it passes.

    Its warnings (about a wrapped env, or render modes it cannot try) are not verdicts.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            check_env(env, skip_render_check=False)
        except AssertionError as exc:
            return str(exc)
    return None


@pytest.mark.parametrize(
    ("gym_id", "kwargs"),
    [
        (QA_ID, {"observation_mode": "text", "render_mode": "ansi"}),
        (QA_ID, {"observation_mode": "messages", "render_mode": "human"}),
        (SUM_ID, {"observation_mode": "text"}),
    ],
)
def test_check_env_passes_for_a_single_turn_env(gym_id: str, kwargs: dict[str, str]) -> None:
    """The answer ends the episode naturally: terminated, not truncated."""
    env = gym.make(gym_id, **kwargs)
    try:
        assert _check_env_verdict(env.unwrapped) is None
        env.reset(seed=0)
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        assert (terminated, truncated, info["stop_reason"]) == (True, False, "completed")
    finally:
        env.close()


def test_a_one_turn_limit_truncates_as_gymnasiums_own_time_limit_does() -> None:
    """`max_turns=1` is a time limit: the step says so with `truncated`, and check_env's
    verdict on it is the one it gives Gymnasium's TimeLimit(max_episode_steps=1)."""
    env = gym.make("vfgym/GuessTheNumber-v0", max_turns=1)
    reference = gym.make("CartPole-v1", max_episode_steps=1)
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step("<move>200</move>")
        assert (terminated, truncated, info["stop_reason"]) == (False, True, "max_turns")
        assert reward == 0.0
        verdict = _check_env_verdict(env.unwrapped)
        assert verdict is not None and "truncates after 1 step" in verdict
        assert verdict == _check_env_verdict(reference)
    finally:
        env.close()
        reference.close()


def test_check_env_passes_for_the_same_game_with_room_for_a_second_turn() -> None:
    """Only the one-step limit trips the checker: the game itself passes."""
    env = gym.make("vfgym/GuessTheNumber-v0", max_turns=2)
    try:
        assert _check_env_verdict(env.unwrapped) is None
    finally:
        env.close()
