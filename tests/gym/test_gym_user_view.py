"""The Gym adapter as an RL practitioner who knows Gymnasium drives it.

Each test uses `vfgym.gym` the way Gymnasium's own envs are
used; they drive the real built-in games through `gym.make` / `gym.make_vec`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import vfgym.gym  # noqa: F401  (registers the vfgym/<Name>-v0 ids)

# Settings the spaces and the step path are built from when the env is made.
MADE_WITH = [
    ("per_step_reward", True),
    ("observation_mode", "messages"),
    ("render_mode", "human"),
    ("max_text_length", 20),
]


@pytest.mark.parametrize(("name", "value"), MADE_WITH)
def test_setting_a_construction_option_on_a_made_env_is_refused_not_silently_ignored(
    name: str, value: Any
) -> None:
    """`env.unwrapped.per_step_reward = True` used to be kept as an attribute the step
    path never read again (no per-step reward; a human env that printed nothing; text
    observations from a "messages" env outside its space): it must say what to do."""
    env = gym.make("vfgym/Wordle-v0")
    try:
        with pytest.raises(AttributeError, match=rf"{name}.*gym\.make\(id, {name}="):
            setattr(env.unwrapped, name, value)
        observation, _ = env.reset(seed=0)
        assert env.observation_space.contains(observation)  # the env is as it was made
        assert getattr(env.unwrapped, name) != value
    finally:
        env.close()


def test_vector_set_attr_of_per_step_reward_is_refused() -> None:
    """Gymnasium's `set_attr` is how a vector env's sub-envs are re-configured; for a
    setting fixed at construction it must fail loudly rather than reward nothing."""
    vec = gym.make_vec("vfgym/Wordle-v0", num_envs=2)
    try:
        with pytest.raises(AttributeError, match="per_step_reward"):
            vec.set_attr("per_step_reward", True)
    finally:
        vec.close()


def test_the_settings_made_with_still_read_back_and_take_effect() -> None:
    env = gym.make("vfgym/Wordle-v0", per_step_reward=True, max_text_length=4000)
    try:
        assert env.unwrapped.per_step_reward is True
        assert env.unwrapped.max_text_length == 4000
        assert env.unwrapped.observation_mode == "text"
        assert env.unwrapped.render_mode is None
        env.reset(seed=0)
        _, reward, *_ = env.step("<move>crane</move>")
        assert reward != 0.0  # Wordle's step_reward scores the marks of a guess
    finally:
        env.close()
