"""GymVectorEnv as a user of Gymnasium's vector API meets it: defects found by probing
its edges, each pinned by a test that failed before the fix."""

from __future__ import annotations

import asyncio
import copy

import gymnasium as gym
import numpy as np
import pytest
from gym_test_envs import GuessEnv

from vfgym.gym import GymEnv, GymVectorEnv

ASYNC_GUESS = "vfgym-test/AsyncGuess-v0"  # hooks that really wait: async mode uses a loop


def _async_vector(n: int = 2) -> GymVectorEnv:
    return gym.make_vec(ASYNC_GUESS, num_envs=n, mode="async")


# ------------------------------------------- a step on the wrong loop loses nothing


def test_a_sync_step_of_episodes_started_by_areset_is_refused_and_loses_none():
    vec = _async_vector()

    async def play() -> tuple:
        await vec.areset(seed=0)
        with pytest.raises(RuntimeError, match=r"await vec\.astep"):
            vec.step(["1", "2"])
        return await vec.astep(["1", "2"])  # the episodes are still there, on this loop

    try:
        observations, *_, infos = asyncio.run(play())
        assert observations == ("1: go higher.", "2: go higher.")
        assert infos["turn"].tolist() == [1, 1]
    finally:
        vec.close()


def test_an_astep_of_episodes_started_by_reset_is_refused_and_loses_none():
    vec = _async_vector()
    try:
        vec.reset(seed=0)
        with pytest.raises(RuntimeError, match=r"step\(\)"):
            asyncio.run(vec.astep(["1", "2"]))
        observations, *_, infos = vec.step(["1", "2"])  # still playable with step()
        assert observations == ("1: go higher.", "2: go higher.")
        assert infos["turn"].tolist() == [1, 1]
    finally:
        vec.close()


# ------------------------------------------------------------------ deepcopy


def test_a_deepcopy_of_an_async_vector_env_plays_on_like_the_original():
    vec = _async_vector()
    try:
        vec.reset(seed=0)
        vec.step(["1", "2"])  # the private loop now exists
        twin = copy.deepcopy(vec)
        try:
            assert twin.step(["3", "4"])[0] == vec.step(["3", "4"])[0]
            assert twin.get_attr("state")[0] is not vec.get_attr("state")[0]
        finally:
            twin.close()
    finally:
        vec.close()


# ----------------------------------------- a bad reset argument changes nothing


def _playing(mode: str = "sync") -> GymVectorEnv:
    """A vector env two steps into its episodes."""
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2, mode=mode)
    vec.reset(seed=0)
    vec.step(["1", "2"])
    return vec


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("seed", "options", "error", "match"),
    [
        ([5, -1], None, ValueError, r"seed must be an int >= 0.*-1"),
        ([5, 1.5], None, TypeError, r"seed.*1\.5"),
        ([5, True], None, TypeError, r"seed.*True"),
        (None, {"idx": 3}, ValueError, r"unknown option.*idx"),
        (None, {"index": "3"}, TypeError, r"options\['index'\] must be an int"),
        (None, {"index": 99}, IndexError, r"options\['index'\]=99"),
        (None, [("index", 3)], TypeError, r"options must be a dict"),
    ],
)
def test_a_bad_seed_or_option_is_refused_before_any_episode_is_lost(
    mode, seed, options, error, match
):
    vec = _playing(mode)
    try:
        with pytest.raises(error, match=match):
            vec.reset(seed=seed, options=options)
        *_, infos = vec.step(["3", "4"])  # both episodes play on
        assert infos["turn"].tolist() == [2, 2]
    finally:
        vec.close()


def test_numpy_seeds_seed_the_sub_envs_as_ints_do():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=3)
    try:
        expected = vec.reset(seed=[3, 4, 9])[0]
        seeds = vec.np_random_seed
        assert vec.reset(seed=[np.int64(3), 4, np.uint32(9)])[0] == expected
        assert vec.np_random_seed == seeds == (3, 4, 9)
        assert vec.reset(seed=np.array([3, 4, 9]))[0] == expected
        # A 0-d array is one seed, as a numpy int is: sub-env i gets seed + i.
        assert vec.reset(seed=np.array(3))[0] == vec.reset(seed=3)[0]
        assert vec.np_random_seed == (3, 4, 5)
    finally:
        vec.close()


def test_sub_envs_of_other_spaces_are_refused_without_closing_the_callers_envs():
    """The envs passed in belong to the caller, who may go on with them; only the ones
    the vector env built from functions are its own to close."""
    mine = GymEnv(GuessEnv())
    mine.reset(seed=0)
    built: list[GymEnv] = []

    def other() -> GymEnv:
        built.append(GymEnv(GuessEnv(), max_text_length=10))
        built[-1].reset(seed=1)
        return built[-1]

    with pytest.raises(ValueError, match="sub-env 1 has spaces"):
        GymVectorEnv([mine, other])
    mine.step("5")  # still playing: a closed env would raise ResetNeeded
    assert mine.state["turn"] == 1
    with pytest.raises(gym.error.ResetNeeded, match="closed"):
        built[0].step("5")
    mine.close()
