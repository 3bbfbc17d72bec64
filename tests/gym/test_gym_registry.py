"""Gym ids: every registered environment makes, passes check_env, and takes its kwargs."""

from __future__ import annotations

import copy
import importlib
import inspect
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator

import gymnasium as gym
import pytest
from gym_test_envs import GuessEnv, load_guess
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env

import vfgym.gym as vgym
from vfgym.envs.registry import describe, registered_names
from vfgym.errors import UnknownEnvironmentError


def _docker_available() -> bool:
    return shutil.which("docker") is not None and (
        subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    )


@pytest.mark.parametrize("name", registered_names())
def test_check_env_passes_for_every_registered_environment(name):
    try:
        info = describe(name)
    except Exception as exc:  # the catalogue module is not there (yet) or broken
        pytest.skip(f"{name}: module does not import: {type(exc).__name__}: {exc}")
    if info.needs_sandbox and not _docker_available():
        if os.environ.get("VFGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{name} needs Docker and VFGYM_REQUIRE_DOCKER=1, but Docker is not usable")
        pytest.skip(f"{name} needs a Docker sandbox and Docker is not usable here")
    assert vgym.REGISTERED_IDS.get(name) == info.gym_id or gym.registry.get(info.gym_id)
    module, _, function = info.target.partition(":")
    loader = getattr(importlib.import_module(module), function)
    # A small dataset keeps generated games (sudoku, sokoban) quick to build; check_env
    # re-makes the env from its spec, which keeps these arguments.
    small = {"num_examples": 3} if "num_examples" in inspect.signature(loader).parameters else {}
    env = gym.make(info.gym_id, **small)
    try:
        assert isinstance(env.unwrapped, vgym.GymEnv)
        check_env(env.unwrapped)
    finally:
        env.close()


def test_make_passes_keyword_arguments_to_the_loader():
    env = gym.make("vfgym-test/Guess-v0", num_examples=3, max_turns=2, observation_mode="messages")
    try:
        inner = env.unwrapped
        assert len(inner.rows) == 3 and inner.environment.max_turns == 2
        assert inner.observation_mode == "messages"
        assert isinstance(inner.observation_space, vgym.MessagesSpace)
    finally:
        env.close()


def test_unknown_loader_arguments_are_refused_with_the_accepted_ones():
    name = "guess-the-number"
    if name not in vgym.REGISTERED_IDS:
        pytest.skip(f"{name} is not in the catalogue yet: {vgym.SKIPPED.get(name)}")
    with pytest.raises(TypeError, match="does not take argument"):
        gym.make(vgym.REGISTERED_IDS[name], colour="blue")


def test_register_user_environments_with_defaults():
    spec = vgym.register("my-games/Guess-v3", GuessEnv, num_examples=4)
    try:
        assert spec.id == "my-games/Guess-v3" and spec.kwargs["num_examples"] == 4
        env = gym.make("my-games/Guess-v3")
        assert len(env.unwrapped.rows) == 4
        assert len(gym.make("my-games/Guess-v3", num_examples=2).unwrapped.rows) == 2
        env.close()
    finally:
        gym.registry.pop("my-games/Guess-v3", None)
    with pytest.raises(ValueError, match="not a valid Gymnasium id"):
        vgym.register("not a valid id!", GuessEnv)
    with pytest.raises(TypeError, match="registered name or a function"):
        vgym.register("my-games/Bad-v0", 42)


@pytest.mark.parametrize("steps", [0, -3, "5", True, 2.5])
def test_register_refuses_a_max_episode_steps_gym_make_would_refuse(steps):
    with pytest.raises((TypeError, ValueError), match=r"max_episode_steps must be an int >= 1"):
        vgym.register("my-games/Limited-v0", GuessEnv, max_episode_steps=steps)
    assert "my-games/Limited-v0" not in gym.registry


def test_register_refuses_an_unknown_name_and_lists_the_known_ones():
    known = registered_names()
    if not known:
        pytest.skip("no environment is installed under the entry-point group")
    with pytest.raises(UnknownEnvironmentError, match=rf"no-such-game.*{known[0]}"):
        vgym.register("my-games/Nothing-v0", "no-such-game")
    assert "my-games/Nothing-v0" not in gym.registry


@pytest.mark.parametrize(
    "option", [{"mode": "async"}, {"autoreset_mode": "same-step"}, {"num_envs": 2}]
)
def test_register_refuses_vector_options_as_defaults(option):
    """As spec kwargs they would reach every gym.make, whose envs do not take them."""
    with pytest.raises(TypeError, match=r"options of gym.make_vec.*gym.make_vec\(id, num_envs"):
        vgym.register("my-games/Vector-v0", GuessEnv, **option)
    assert "my-games/Vector-v0" not in gym.registry


@pytest.mark.parametrize(
    ("gym_id", "missing"),
    [
        ("Guess-v0", "a namespace"),
        ("my-games/Guess", "a version"),
        ("Guess", "a namespace and a version"),
    ],
)
def test_register_refuses_ids_without_a_namespace_or_version(gym_id, missing):
    with pytest.raises(ValueError, match=rf"lacks {missing}.*'namespace/Name-vN'"):
        vgym.register(gym_id, GuessEnv)
    assert gym_id not in gym.registry


def test_make_refuses_a_render_mode_it_cannot_do():
    with (
        pytest.raises(ValueError, match="render_mode"),
        pytest.warns(UserWarning, match="not in the possible render_modes"),  # Gymnasium's
    ):
        gym.make("vfgym-test/Guess-v0", render_mode="rgb_array")


def test_a_loader_that_builds_no_multiturn_env_is_refused():
    with pytest.raises(TypeError, match="not a vfgym MultiTurnEnv"):
        vgym.make_env(lambda: object())


def test_module_prefix_id_imports_vfgym_gym_on_demand():
    if not vgym.REGISTERED_IDS:
        pytest.skip("no catalogue environment imports yet")
    gym_id = next(iter(vgym.REGISTERED_IDS.values()))
    script = (
        "import gymnasium as gym\n"
        f"assert {gym_id!r} not in gym.registry\n"
        f"env = gym.make('vfgym.gym:{gym_id}')\n"
        "obs, info = env.reset(seed=0)\n"
        "assert isinstance(obs, str) and obs\n"
        "print('made', env.spec.id)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"made {gym_id}" in done.stdout


def test_made_envs_refuse_a_step_before_reset_themselves():
    """Registered ids skip Gymnasium's OrderEnforcing wrapper: GymEnv enforces the order."""
    env = gym.make("vfgym-test/Guess-v0")
    try:
        with pytest.raises(gym.error.ResetNeeded, match="reset"):
            env.step("5")
        with pytest.warns(UserWarning, match="without a render_mode"):
            assert env.render() is None  # no render_mode: a warning, no crash
        env.reset(seed=0)
        assert env.step("5")[4]["turn"] == 1
    finally:
        env.close()


def test_made_envs_skip_the_passive_checker_unless_asked():
    """GymEnv guarantees what PassiveEnvChecker would warn about; it can be had back."""
    env = gym.make("vfgym-test/Guess-v0")
    checked = gym.make("vfgym-test/Guess-v0", disable_env_checker=False)
    try:
        assert type(env) is vgym.GymEnv
        assert isinstance(checked, gym.wrappers.PassiveEnvChecker)
        checked.reset(seed=0)
        checked.step("5")
    finally:
        env.close()
        checked.close()


def test_a_made_sandbox_env_runs_one_sandbox_unless_told_otherwise():
    """One episode at a time needs one sandbox, not the pool a batch of rollouts shares."""
    if "python-math" not in vgym.REGISTERED_IDS:
        pytest.skip("the python-math environment is not installed")
    gym_id = vgym.REGISTERED_IDS["python-math"]
    for kwargs, expected in (({}, 1), ({"pool_size": 3}, 3)):
        env = gym.make(gym_id, **kwargs)
        try:
            assert env.unwrapped.environment.pool_size == expected
        finally:
            env.close()


FUNCTION_ID = "eco-test/Guess-v0"


STRING_ID = "eco-test/GuessByPath-v0"


LAMBDA_ID = "eco-test/GuessLambda-v0"


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
