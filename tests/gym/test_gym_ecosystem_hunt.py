"""vfgym ids under Gymnasium's own tooling: spec serialisation, re-making envs from
specs, vector envs and the errors a practitioner meets on the way."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator

import gymnasium as gym
import pytest
from gym_test_envs import GuessEnv, load_guess
from gymnasium.envs.registration import EnvSpec

import vfgym.gym as vgym

FUNCTION_ID = "eco-hunt/Guess-v0"
STRING_ID = "eco-hunt/GuessByPath-v0"
LAMBDA_ID = "eco-hunt/GuessLambda-v0"


@pytest.fixture
def function_id() -> Iterator[str]:
    """An id registered, as the README shows, with the function that builds the env."""
    vgym.register(FUNCTION_ID, load_guess, num_examples=3)
    yield FUNCTION_ID
    gym.registry.pop(FUNCTION_ID, None)


def assert_worker_processes_play(env_id: str) -> None:
    """Gymnasium's async vector env over `env_id` (one worker process per sub-env)
    starts episodes."""
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="async")
    try:
        observations, _ = vec.reset(seed=0)
        assert all("Guess my number" in text for text in observations)
    finally:
        vec.close()


def test_spec_of_an_id_registered_with_a_function_round_trips_through_json(function_id):
    """`EnvSpec.to_json` is Gymnasium's way to save a spec; a spec holding the loader
    object failed with "Object of type function is not JSON serializable"."""
    text = gym.spec(function_id).to_json()
    restored = EnvSpec.from_json(text)
    env = gym.make(restored)
    try:
        observation, _ = env.reset(seed=0)
        assert "Guess my number" in observation
        assert len(env.unwrapped.rows) == 3
    finally:
        env.close()


def test_made_env_spec_with_kwargs_round_trips_and_remakes_the_same_env(function_id):
    env = gym.make(function_id, num_examples=2, max_episode_steps=4)
    try:
        restored = EnvSpec.from_json(env.spec.to_json())
        assert restored.max_episode_steps == 4 and restored.kwargs["num_examples"] == 2
        again = gym.make(restored)
        try:
            assert len(again.unwrapped.rows) == 2
            assert again.reset(seed=5)[0] == env.reset(seed=5)[0]
        finally:
            again.close()
    finally:
        env.close()


def test_an_id_kept_by_name_vectorises_in_worker_processes(function_id):
    """Gymnasium's async vector env makes each sub-env in a worker process, which
    imports the environment from its name."""
    assert gym.spec(function_id).kwargs["environment"] == "gym_test_envs:load_guess"
    assert_worker_processes_play(function_id)


def test_register_takes_a_module_colon_function_string_as_gymnasium_does():
    """Gymnasium's own entry points are 'module:attr' strings; register takes one too."""
    vgym.register(STRING_ID, "gym_test_envs:load_guess", num_examples=2)
    try:
        env = gym.make(STRING_ID)
        try:
            assert isinstance(env.unwrapped.environment, GuessEnv)
            assert len(env.unwrapped.rows) == 2
        finally:
            env.close()
    finally:
        gym.registry.pop(STRING_ID, None)


@pytest.mark.parametrize(
    ("reference", "error"),
    [
        ("gym_test_envs:no_such_function", "no attribute 'no_such_function'"),
        ("no_such_module_xyz:load", "cannot import module 'no_such_module_xyz'"),
        ("gym_test_envs:SYSTEM", "is not callable"),
    ],
)
def test_register_refuses_a_module_colon_function_string_that_cannot_build(reference, error):
    with pytest.raises((TypeError, ValueError), match=error):
        vgym.register(STRING_ID, reference)
    assert STRING_ID not in gym.registry


def test_an_id_registered_with_a_lambda_still_makes_and_vectorises():
    """A function that cannot be imported by name stays the object itself (Gymnasium's
    async vector env ships it with cloudpickle)."""
    vgym.register(LAMBDA_ID, lambda **kw: GuessEnv(**kw), num_examples=2)
    try:
        assert callable(gym.spec(LAMBDA_ID).kwargs["environment"])
        assert_worker_processes_play(LAMBDA_ID)
    finally:
        gym.registry.pop(LAMBDA_ID, None)


def test_pickling_a_vector_env_names_the_vector_env_and_make_vec():
    """The error used to speak of a single GymEnv and `gym.make`."""
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2)
    try:
        with pytest.raises(TypeError, match=r"GymVectorEnv cannot be pickled.*gym\.make_vec"):
            pickle.dumps(vec)
    finally:
        vec.close()


def test_make_from_a_vector_envs_spec_says_to_use_make_vec():
    """`gym.make(vec.spec)` passes make_vec's own keywords (num_envs, ...) to the loader;
    the error used to suggest `num_envs` was a misspelt `num_examples`."""
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2, max_episode_steps=3)
    try:
        with pytest.raises(TypeError, match=r"spec of a vector env.*gym\.make_vec\(spec\)"):
            gym.make(vec.spec)
        again = gym.make_vec(vec.spec)
        try:
            assert again.num_envs == 2 and again.max_episode_steps == 3
        finally:
            again.close()
    finally:
        vec.close()


def test_a_vector_env_still_deep_copies():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2)
    try:
        vec.reset(seed=0)
        twin = copy.deepcopy(vec)
        try:
            assert twin.step(["5", "5"])[0] == vec.step(["5", "5"])[0]
        finally:
            twin.close()
    finally:
        vec.close()


def test_truncate_before_reset_names_truncate_not_step():
    """`env.unwrapped.truncate()` is what the README gives for a `TimeLimit` cut; called
    before any reset its error said "call reset() before step()"."""
    env = gym.make("vfgym-test/Guess-v0", max_episode_steps=2)
    try:
        with pytest.raises(gym.error.ResetNeeded, match=r"before truncate\(\)"):
            env.unwrapped.truncate()
    finally:
        env.close()
