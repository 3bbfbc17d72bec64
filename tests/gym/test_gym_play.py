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
import numpy as np
import pytest
from gym_test_envs import GuessEnv, bisect_policy, load_guess
from gymnasium.spaces.utils import flatten, flatten_space, unflatten
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import DictInfoToList

import vfgym.gym as vgym
from vfgym.gym import (
    GymEnv,
    MessagesSpace,
    Trajectory,
    UnicodeText,
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


@pytest.mark.parametrize("chars", [2, 40, 120])
def test_messages_space_samples_are_members_whatever_its_json_bound(chars):
    """`sample()` drew up to three 64-character messages whatever `shared_memory_chars`
    allowed, so a space with a small bound sampled lists it does not contain."""
    space = MessagesSpace(300, shared_memory_chars=chars, seed=0)
    samples = [space.sample() for _ in range(200)]
    assert all(space.contains(sample) for sample in samples)
    if chars == 2:  # the JSON of an empty list: the only member
        assert all(sample == [] for sample in samples)
    else:  # still messages with text, not just what trivially fits
        assert any(message["content"] for sample in samples for message in sample)


def test_messages_spaces_holding_different_lists_are_not_equal():
    """Equality ignored `shared_memory_chars`, though it changes which lists are members
    (and what shared memory reserves): Gymnasium compares sub-env spaces with `==`."""
    small, default = MessagesSpace(10, shared_memory_chars=40), MessagesSpace(10)
    member = [{"role": "user", "content": "0123456789"}] * 3
    assert default.contains(member) and not small.contains(member)
    assert small != default
    assert MessagesSpace(10, shared_memory_chars=40) == small


@pytest.mark.parametrize(
    ("chars", "error"), [(0, ValueError), (-5, ValueError), (1, ValueError), (2.5, TypeError)]
)
def test_messages_space_refuses_a_json_bound_no_list_fits(chars, error):
    """0 silently meant the default, and -5 or 1 made a space with no member at all."""
    with pytest.raises(error, match="shared_memory_chars must be an int >= 2"):
        MessagesSpace(10, shared_memory_chars=chars)


def test_unflatten_takes_every_member_of_the_flattened_space():
    """A Box sample of `flatten_space` holds surrogates and control code points; unflatten
    raised UnicodeDecodeError on the surrogates. As for Gymnasium's `Text`, every member
    of the flat Box unflattens to a member of the space, and members round-trip."""
    space = UnicodeText(64)
    box = flatten_space(space)
    box.seed(0)
    for _ in range(50):
        text = unflatten(space, box.sample())
        assert space.contains(text), repr(text)
    surrogate = np.array([0x61, 0xD800, 0x1B, 0x110000, 0x62], dtype=np.int32)
    assert unflatten(UnicodeText(5), surrogate) == "a\ufffd\ufffdb"
    text = "héllo\tw✓rld 😀\n"
    assert unflatten(space, flatten(space, text)) == text


@pytest.mark.parametrize(
    ("gym_id", "why"),
    [
        ("my-mod:my-games/Guess-v0", "module"),  # gym.make imports a module 'my-mod'
        ("my-games/Guess-v00", "as 'my-games/Guess-v0'"),  # gym.make looks up -v0
        ("my-games/Guess-v01", "as 'my-games/Guess-v1'"),
    ],
)
def test_register_refuses_ids_gym_make_could_never_make(gym_id, why):
    """Such ids were registered (the -v00 one raising Gymnasium's 'No registered env'
    from inside `register`), and every `gym.make(id)` failed."""
    try:
        with pytest.raises(ValueError, match=why):
            vgym.register(gym_id, load_guess)
        assert gym_id not in gym.registry
    finally:
        gym.registry.pop(gym_id, None)


def test_register_takes_reward_threshold_as_the_specs_own():
    """`reward_threshold` (an `EnvSpec` field, as in `gym.register`) went to the loader
    as a keyword, so every `gym.make(id)` failed with a TypeError."""
    try:
        spec = vgym.register("my-games/Threshold-v0", load_guess, reward_threshold=0.9)
        assert spec.reward_threshold == 0.9 and "reward_threshold" not in spec.kwargs
        env = gym.make("my-games/Threshold-v0")
        try:
            assert env.spec.reward_threshold == 0.9
            assert env.reset(seed=0)[0]
        finally:
            env.close()
    finally:
        gym.registry.pop("my-games/Threshold-v0", None)


@pytest.mark.parametrize(
    "field",
    [
        {"disable_env_checker": False},
        {"order_enforce": True},
        {"entry_point": "my_module:make"},
        {"additional_wrappers": ()},
        {"kwargs": {"num_examples": 3}},  # gym.register's way of giving the defaults
    ],
)
def test_register_refuses_spec_fields_as_loader_defaults(field):
    """These are `gym.register`'s, not the loader's: as defaults they reached every
    `gym.make` as loader keywords, and failed there."""
    try:
        with pytest.raises(TypeError, match=r"EnvSpec.*not keywords of the environment"):
            vgym.register("my-games/Field-v0", load_guess, **field)
        assert "my-games/Field-v0" not in gym.registry
    finally:
        gym.registry.pop("my-games/Field-v0", None)


def test_a_policy_with_a_required_keyword_only_parameter_is_refused_before_reset():
    """`policy(observation, *, info)` failed at its first call, after the reset had
    started an episode; it is refused up front like a third positional parameter."""
    env = GymEnv(GuessEnv())
    try:
        with pytest.raises(TypeError, match=r"keyword-only.*'info'.*policy\(observation, info\)"):
            play_episode(env, lambda observation, *, info: "1", seed=0)
        assert env.state is None  # no episode was started
    finally:
        env.close()


@pytest.mark.parametrize(
    ("default", "match"),
    [
        ({"render_mode": "rgb_array"}, "render_mode"),
        ({"observation_mode": "msgs"}, "observation_mode"),
        ({"dataset": "test"}, "dataset"),
        ({"max_text_length": 0}, "max_text_length"),
        ({"count_tokens": 5}, "count_tokens"),
    ],
)
def test_register_refuses_adapter_defaults_every_gym_make_would_refuse(default, match):
    """Registered as they were, every `gym.make(id)` then failed on them."""
    try:
        with pytest.raises((TypeError, ValueError), match=match):
            vgym.register("my-games/Adapter-v0", load_guess, **default)
        assert "my-games/Adapter-v0" not in gym.registry
    finally:
        gym.registry.pop("my-games/Adapter-v0", None)


def test_register_keeps_valid_adapter_defaults():
    try:
        vgym.register("my-games/Ansi-v0", load_guess, render_mode="ansi", max_text_length=50)
        env = gym.make("my-games/Ansi-v0")
        try:
            assert env.render_mode == "ansi" and env.unwrapped.max_text_length == 50
        finally:
            env.close()
    finally:
        gym.registry.pop("my-games/Ansi-v0", None)


def test_make_vec_takes_a_numpy_int_of_envs_as_gymnasiums_own_vector_envs_do():
    """`gym.make_vec(id, num_envs=np.int64(3))` gave "num_envs must be an int >= 1, not
    np.int64(3)" where `vectorization_mode="sync"` made three sub-envs."""
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=np.int64(3))
    try:
        assert vec.num_envs == 3 and type(vec.num_envs) is int
        assert len(vec.reset(seed=0)[0]) == 3
    finally:
        vec.close()
    for bad in (True, 2.0, "3"):
        with pytest.raises(TypeError, match="num_envs must be an int >= 1"):
            gym.make_vec("vfgym-test/Guess-v0", num_envs=bad)


def test_a_loaders_own_type_error_is_not_blamed_on_the_keywords():
    """Every TypeError of a loader got "(the Gym adapter's own keywords are: ...)"
    appended, sending whoever met a bug inside the loader to check their keywords."""

    def broken_loader() -> GuessEnv:
        return GuessEnv(num_examples=len(5))  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"has no len\(\)$"):
        vgym.make_env(broken_loader)
    with pytest.raises(TypeError, match=r"\['colour'\].*adapter's own keywords are"):
        vgym.make_env(load_guess, colour="blue")
