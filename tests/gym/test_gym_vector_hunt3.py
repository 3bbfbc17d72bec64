"""Vector envs, batched infos and registration as a Gymnasium user drives them."""

from __future__ import annotations

import pprint
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from gym_test_envs import GuessEnv

import vfgym.gym as vgym


@pytest.fixture
def vec() -> Iterator[vgym.GymVectorEnv]:
    env = vgym.GymVectorEnv([lambda: vgym.GymEnv(GuessEnv(max_turns=1)) for _ in range(3)])
    yield env
    env.close()


def _nothing_built(batch: dict) -> bool:
    """Whether every value of `batch` is still waiting to be built (none is an array)."""
    return not any(isinstance(value, np.ndarray | dict) for value in dict.values(batch))


def test_pprint_lays_a_batch_out_as_it_lays_out_a_plain_dict(vec: vgym.GymVectorEnv) -> None:
    _, reset_infos = vec.reset(seed=0)
    *_, step_infos = vec.step(["3", "4", "5"])  # max_turns=1: every episode ends
    assert _nothing_built(step_infos)  # stepping builds nothing
    for batch in (reset_infos, step_infos):
        plain = dict(batch)
        assert pprint.pformat(batch) == pprint.pformat(plain)
        assert pprint.pformat(batch, sort_dicts=False) == pprint.pformat(plain, sort_dicts=False)
        assert pprint.pformat([batch], width=40) == pprint.pformat([plain], width=40)
        assert pprint.saferepr(batch) == pprint.saferepr(plain)
        assert repr(batch) == repr(plain)
    metrics = step_infos["metrics"]  # a nested batch
    assert isinstance(metrics, vgym.BatchedInfo)
    assert pprint.pformat({"metrics": metrics}) == pprint.pformat({"metrics": dict(metrics)})
    small = vgym.BatchedInfo(b=1, a=2)
    assert pprint.pformat(small) == "{'a': 2, 'b': 1}"


@pytest.mark.parametrize(
    ("make", "wanted"),
    [
        (lambda: gym.make("vfgym-test/Guess-v0", mode="async"), "gym.make_vec(id, num_envs"),
        (
            lambda: gym.make("vfgym-test/Guess-v0", autoreset_mode="SameStep"),
            "gym.make_vec(id, num_envs",
        ),
        (
            lambda: gym.make_vec(
                "vfgym-test/Guess-v0", num_envs=2, vectorization_mode="sync", mode="async"
            ),
            "vectorization_mode",
        ),
        (
            lambda: gym.make_vec(
                "vfgym-test/Guess-v0",
                num_envs=2,
                vectorization_mode="sync",
                autoreset_mode="SameStep",
            ),
            "vector_kwargs={'autoreset_mode'",
        ),
    ],
)
def test_a_vector_option_given_to_a_single_env_says_where_it_goes(make, wanted: str) -> None:
    with pytest.raises(TypeError, match="option of the vector env") as caught:
        make()
    assert wanted in str(caught.value)


def test_a_per_step_reward_that_is_not_a_bool_is_refused() -> None:
    # "no" is truthy: taken as it is, it would turn per-step rewards on.
    with pytest.raises(ValueError, match="per_step_reward must be True or False"):
        vgym.register("vfgym-hunt3/PerStep-v0", "wordle", per_step_reward="no")
    assert gym.registry.get("vfgym-hunt3/PerStep-v0") is None
    with pytest.raises(TypeError, match="per_step_reward must be True or False"):
        gym.make("vfgym/Wordle-v0", per_step_reward="no")
    env = gym.make("vfgym/Wordle-v0", per_step_reward=np.bool_(True))
    assert env.unwrapped.per_step_reward is True
    env.close()


def test_one_row_per_sub_env_is_refused_with_how_to_get_it(vec: vgym.GymVectorEnv) -> None:
    vec.reset(seed=0)
    with pytest.raises(TypeError, match="every sub-env it resets") as caught:
        vec.reset(options={"index": [0, 1, 2]})
    assert "'reset_mask'" in str(caught.value)
    # The advice works: sub-env 1 alone starts on row 4.
    mask = np.array([False, True, False])
    _, infos = vec.reset(options={"index": 4, "reset_mask": mask})
    assert infos["_state"].tolist() == [False, True, False]
    assert infos["state"][1]["example_id"] == 4


def test_a_gym_env_made_directly_refuses_a_per_step_reward_that_is_not_a_bool() -> None:
    """`GymEnv(env, per_step_reward="no")` rewarded every step: "no" is a true value."""
    from vfgym.games.guess_the_number import load_environment

    with pytest.raises(TypeError, match="per_step_reward must be True or False, not 'no'"):
        vgym.GymEnv(load_environment(num_examples=1), per_step_reward="no")
    env = vgym.GymEnv(load_environment(num_examples=1), per_step_reward=np.bool_(False))
    try:
        assert env.per_step_reward is False
    finally:
        env.close()
