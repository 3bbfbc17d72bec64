"""The play helpers: policies that read the conversation, info lists, counts, misuse."""

from __future__ import annotations

import asyncio
import functools
import gc
import re
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest
from gym_test_envs import GuessEnv, bisect_policy
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import DictInfoToList

from vfgym.gym import (
    GymEnv,
    Trajectory,
    aplay_episode,
    aplay_vector,
    play_episode,
    play_vector,
)

HINT = re.compile(r"(-?\d+): go (higher|lower)")


def search_from_history(observation: str, info: dict[str, Any]) -> str:
    """Binary search over 1..20 that reads every hint of the conversation so far.

    The observation is only the newest reply, so without the whole conversation
    this policy cannot know its range; with it, it wins within 5 guesses.
    """
    assert observation.endswith(info["messages"][-1]["content"])  # the same sub-env's info
    low, high = 1, 20
    for message in info["messages"]:
        for guess, hint in HINT.findall(message["content"] if message["role"] == "user" else ""):
            if hint == "higher":
                low = max(low, int(guess) + 1)
            else:
                high = min(high, int(guess) - 1)
    return str((low + high) // 2)


async def asearch_from_history(observation: str, info: dict[str, Any]) -> str:
    await asyncio.sleep(0)
    return search_from_history(observation, info)


def _all_won_by_search(trajectories: list[Trajectory], episodes: int) -> None:
    assert len(trajectories) == episodes
    for trajectory in trajectories:
        assert trajectory.terminated and trajectory.length <= 5
        assert trajectory.final_info["episode_reward"] == 1.0


def _vector(how: str, autoreset: AutoresetMode) -> gym.vector.VectorEnv:
    if how == "gymnasium":
        return gym.make_vec(
            "vfgym-test/Guess-v0",
            num_envs=3,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": autoreset},
        )
    return gym.make_vec("vfgym-test/Guess-v0", num_envs=3, autoreset_mode=autoreset)


def _play_vector(helper: str, vec_env: gym.vector.VectorEnv, policy: Any, **kwargs: Any) -> Any:
    if helper == "sync":
        return play_vector(vec_env, policy, **kwargs)
    return asyncio.run(aplay_vector(vec_env, policy, **kwargs))


def _play_episode(helper: str, env: gym.Env, policy: Any, **kwargs: Any) -> Trajectory:
    if helper == "sync":
        return play_episode(env, policy, **kwargs)
    return asyncio.run(aplay_episode(env, policy, **kwargs))


# ------------------------------------------------------- (observation, info) policies


@pytest.mark.parametrize("autoreset", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize("how", ["vfgym", "gymnasium"])
@pytest.mark.parametrize(
    ("helper", "policy"),
    [
        ("sync", search_from_history),
        ("sync", asearch_from_history),
        ("async", search_from_history),
        ("async", asearch_from_history),
    ],
    ids=["play-sync", "play-async", "aplay-sync", "aplay-async"],
)
def test_a_two_parameter_policy_gets_its_sub_envs_own_conversation(helper, policy, how, autoreset):
    vec_env = _vector(how, autoreset)
    try:
        trajectories = _play_vector(helper, vec_env, policy, seed=3, episodes=7)
    finally:
        vec_env.close()
    _all_won_by_search(trajectories, 7)


@pytest.mark.parametrize("policy", [search_from_history, asearch_from_history])
@pytest.mark.parametrize("helper", ["sync", "async"])
def test_a_two_parameter_policy_plays_a_single_env_from_the_conversation(helper, policy):
    env = GymEnv(GuessEnv())
    try:
        trajectories = [_play_episode(helper, env, policy, seed=seed) for seed in range(6)]
    finally:
        env.close()
    _all_won_by_search(trajectories, 6)


class Searcher:
    """A callable object: its signature, read without `self`, has two parameters."""

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        return search_from_history(observation, info)


def _with_notes(notes: list[str], observation: str, info: dict[str, Any]) -> str:
    notes.append(info["messages"][-1]["content"])
    return search_from_history(observation, info)


def test_the_policy_form_is_read_from_its_signature():
    """Two required positional parameters get the info; a default, or a signature that
    cannot be read (the builtin `str`), means the observation alone."""
    notes: list[str] = []
    two: list[Callable[..., Any]] = [Searcher(), functools.partial(_with_notes, notes)]
    env = GymEnv(GuessEnv())
    try:
        for policy in two:
            _all_won_by_search([play_episode(env, policy, seed=1)], 1)
        assert notes and notes[0].startswith("Round")
        one = play_episode(env, lambda observation, info=None: str(info), seed=1, max_steps=1)
        assert one.actions == ["None"]
        unreadable = play_episode(env, str, seed=1, max_steps=1)
        assert unreadable.actions == [unreadable.observations[0]]
    finally:
        env.close()
    with pytest.raises(TypeError, match=r"requires 3 positional arguments.*give the others"):
        play_episode(GymEnv(GuessEnv()), lambda observation, info, extra: "1", seed=1)


# ------------------------------------------------------------------ DictInfoToList


@pytest.mark.parametrize("autoreset", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize("helper", ["sync", "async"])
def test_play_vector_plays_through_dict_info_to_list(helper, autoreset):
    def summary(trajectories: list[Trajectory]) -> list[tuple]:
        return sorted(
            (tuple(t.observations), tuple(t.actions), tuple(t.rewards), t.terminated)
            for t in trajectories
        )

    plain, listed = _vector("vfgym", autoreset), DictInfoToList(_vector("vfgym", autoreset))
    try:
        expected = summary(_play_vector(helper, plain, search_from_history, seed=2, episodes=5))
        played = _play_vector(helper, listed, search_from_history, seed=2, episodes=5)
    finally:
        plain.close()
        listed.close()
    assert summary(played) == expected
    _all_won_by_search(played, 5)


# ------------------------------------------------------------------ counts and envs


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (0, ValueError, "got 0"),
        (-1, ValueError, "got -1"),
        (2.5, TypeError, "not float"),
        ("3", TypeError, "not str"),
        (True, TypeError, "not bool"),
    ],
)
@pytest.mark.parametrize("helper", ["sync", "async"])
def test_counts_must_be_ints_of_at_least_one(helper, value, error, match):
    vec_env = gym.make_vec("vfgym-test/Guess-v0", num_envs=2)
    env = GymEnv(GuessEnv())
    try:
        with pytest.raises(error, match=f"episodes must be an int >= 1 or None, {match}"):
            _play_vector(helper, vec_env, bisect_policy, seed=0, episodes=value)
        with pytest.raises(error, match=f"max_steps must be an int >= 1 or None, {match}"):
            _play_episode(helper, env, bisect_policy, seed=0, max_steps=value)
    finally:
        vec_env.close()
        env.close()


@pytest.mark.parametrize("helper", ["sync", "async"])
def test_the_wrong_kind_of_env_is_refused_naming_the_helper_to_use(helper):
    vec_env = gym.make_vec("vfgym-test/Guess-v0", num_envs=2)
    env = gym.make("vfgym-test/Guess-v0")
    try:
        with pytest.raises(TypeError, match="got GymEnv; use play_episode"):
            _play_vector(helper, env, bisect_policy, seed=0)
        with pytest.raises(TypeError, match=r"vector env \(GymVectorEnv\); use play_vector"):
            _play_episode(helper, vec_env, bisect_policy, seed=0)
    finally:
        vec_env.close()
        env.close()


# ------------------------------------------------------------ awaitables from sync code


async def _achat(observation: str) -> str:
    return bisect_policy(observation)


def test_a_plain_function_returning_a_coroutine_is_refused_without_a_warning():
    vec_env = gym.make_vec("vfgym-test/Guess-v0", num_envs=2)
    env = GymEnv(GuessEnv())
    gc.collect()  # so only this test's coroutines can be reported below
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(TypeError, match=r"returned an awaitable.*`async def`.*aplay_"):
                play_episode(env, lambda observation: _achat(observation), seed=0)
            with pytest.raises(TypeError, match=r"returned an awaitable.*`async def`.*aplay_"):
                play_vector(vec_env, lambda observation: _achat(observation), seed=0)
            gc.collect()
        assert not [w for w in caught if "'_achat' was never awaited" in str(w.message)]
        # The same callable is fine where it can be awaited.
        played = asyncio.run(aplay_episode(env, lambda observation: _achat(observation), seed=0))
        assert played.actions == play_episode(env, bisect_policy, seed=0).actions
    finally:
        vec_env.close()
        env.close()
