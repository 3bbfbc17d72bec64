"""Vector envs: sync and async give identical episodes, in every autoreset mode."""

from __future__ import annotations

import asyncio
import copy
import pickle
import pprint
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from gym_test_envs import GuessEnv, bisect_policy

import vfgym.gym as vgym
from vfgym.gym import GymEnv, GymVectorEnv, StateView, Trajectory, aplay_vector, play_vector
from vfgym.gym.shipping import _rebuild_view, new_outbox
from vfgym.gym.spaces import SharedTextBatch


def _summary(trajectories: list[Trajectory]) -> list[tuple]:
    """What must match between two runs: everything but wall-clock timings."""
    return sorted(
        (
            tuple(t.observations),
            tuple(t.actions),
            tuple(t.rewards),
            t.terminated,
            t.truncated,
            t.final_info["state"]["example_id"],
            tuple(sorted(t.final_info["metrics"].items())),
        )
        for t in trajectories
    )


def _play(gym_id: str, mode: str, *, episodes: int = 5, **vector_kwargs) -> list[Trajectory]:
    env = gym.make_vec(
        gym_id, num_envs=3, vectorization_mode=mode, vector_kwargs=vector_kwargs or None
    )
    try:
        return play_vector(env, bisect_policy, seed=7, episodes=episodes)
    finally:
        env.close()


def test_sync_and_async_vector_envs_play_identical_episodes():
    sync = _play("vfgym-test/Guess-v0", "sync")
    async_ = _play("vfgym-test/Guess-v0", "async")  # shared memory on, as by default
    assert len(sync) == 5
    assert _summary(sync) == _summary(async_)
    assert {t.terminated for t in sync} == {True, False}  # wins and max_turns both covered
    by_episode = {(t.state["example_id"], tuple(t.actions)): t.state for t in async_}
    for t in sync:  # the State that crossed the process boundary is the same episode's
        assert by_episode[(t.state["example_id"], tuple(t.actions))] == t.state
    assert all(isinstance(t.observations[1], str) for t in async_)


def test_async_vector_env_without_shared_memory_gives_the_same_episodes():
    assert _summary(_play("vfgym-test/Guess-v0", "async", shared_memory=False)) == _summary(
        _play("vfgym-test/Guess-v0", "sync")
    )


@pytest.mark.parametrize("autoreset", ["SameStep", "Disabled"])
def test_other_autoreset_modes_play_the_same_episodes(autoreset):
    mode = gym.vector.AutoresetMode(autoreset)
    reference = _summary(_play("vfgym-test/Guess-v0", "sync"))
    assert _summary(_play("vfgym-test/Guess-v0", "sync", autoreset_mode=mode)) == reference
    assert _summary(_play("vfgym-test/Guess-v0", "async", autoreset_mode=mode)) == reference


def test_messages_mode_vectorises_in_both_modes():
    def policy(messages: list) -> dict:
        return {"role": "assistant", "content": bisect_policy(messages[-1]["content"])}

    results = []
    for mode in ("sync", "async"):
        env = gym.make_vec(
            "vfgym-test/Guess-v0",
            num_envs=2,
            vectorization_mode=mode,
            observation_mode="messages",
        )
        try:
            results.append(play_vector(env, policy, seed=3, episodes=2))
        finally:
            env.close()
    sync, async_ = results
    assert [t.observations for t in sync] == [t.observations for t in async_]
    assert isinstance(async_[0].observations[1], list)
    assert async_[0].observations[1][0]["role"] == "user"


def test_tool_calls_through_an_async_vector_env():
    env = gym.make_vec("vfgym-test/Calculator-v0", num_envs=2, vectorization_mode="async")
    try:
        observations, _ = env.reset(seed=0)
        assert all("Use the add tool" in o for o in observations)
        call = {
            "id": "c",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
        }
        turn = {"role": "assistant", "content": "", "tool_calls": [call]}
        observations, rewards, terminated, truncated, infos = env.step((turn, "no tools"))
        assert observations == ("4", "")
        assert list(terminated) == [False, True] and list(truncated) == [False, False]
        assert list(rewards) == [0.0, 0.0]  # "no tools" answered nothing: reward 0
        assert list(infos["state"][0]["tools_called"]) == ["add"]
    finally:
        env.close()


def test_copy_false_hands_out_a_live_view_of_shared_memory():
    env = gym.make_vec(
        "vfgym-test/Guess-v0",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"copy": False},
    )
    try:
        observations, _ = env.reset(seed=0)
        assert isinstance(observations, SharedTextBatch)
        assert "between 1 and 20" in observations[0]
        env.step(("5", "6"))
        assert observations[0].startswith("5") and observations[1].startswith("6")
        assert tuple(observations) == (observations[0], observations[1])
    finally:
        env.close()


async def test_aplay_vector_runs_an_async_policy_concurrently():
    in_flight = 0
    peak = 0

    async def policy(observation: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        return bisect_policy(observation)

    env = gym.make_vec("vfgym-test/Guess-v0", num_envs=3, vectorization_mode="sync")
    try:
        played = await aplay_vector(env, policy, seed=7, episodes=5)
    finally:
        env.close()
    assert peak == 3
    assert _summary(played) == _summary(_play("vfgym-test/Guess-v0", "sync"))


def _step_infos(mode: str, autoreset: str, steps: int) -> list[tuple]:
    env = gym.make_vec(
        "vfgym-test/Guess-v0",
        num_envs=2,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode(autoreset)},
    )
    seen = []
    try:
        observations, infos = env.reset(seed=5)
        if mode == "async":  # the workers do send deltas
            assert env.get_attr("_ship") == (True, True)
        for _ in range(steps):
            observations, _, _, _, infos = env.step(tuple(bisect_policy(o) for o in observations))
            for i in range(2):
                final = infos.get("final_info", {})
                if final.get("_state", [False, False])[i]:
                    final_state = copy.deepcopy(dict(final["state"][i]))
                    seen.append((i, "final", final_state, final["messages"][i]))
                seen.append((i, copy.deepcopy(dict(infos["state"][i])), infos["messages"][i]))
    finally:
        env.close()
    return seen


@pytest.mark.parametrize("autoreset", ["NextStep", "SameStep"])
def test_async_infos_carry_the_same_state_and_messages_at_every_step(autoreset):
    """The State crosses the pipe as deltas; what arrives must be the whole State."""
    sync = _step_infos("sync", autoreset, 16)
    async_ = _step_infos("async", autoreset, 16)
    assert len(sync) == len(async_) >= 32
    for expected, got in zip(sync, async_, strict=True):
        *head, state, messages = expected
        *head_got, state_got, messages_got = got
        assert head == head_got and messages == messages_got
        assert StateView(state) == StateView(state_got)  # equal but for wall-clock timings
        assert messages_got == state_got["prompt"] + state_got["completion"]


def test_state_deltas_do_not_grow_with_the_conversation():
    """After the first step, what a view sends is the step's new messages, not the history."""
    state = {"prompt": [{"role": "user", "content": "x" * 500}], "completion": [], "turn": 0}
    outbox = new_outbox(None, 1)
    sizes = []
    for turn in range(30):
        state["completion"] += [
            {"role": "assistant", "content": str(turn)},
            {"role": "user", "content": f"{turn}: go higher."},
        ]
        state["turn"] = turn + 1
        shipped = pickle.dumps(outbox.pack(state))
        sizes.append(len(shipped))
        view = _rebuild_view(*pickle.loads(shipped))
        assert dict(view) == state
    assert sizes[-1] == pytest.approx(sizes[1], abs=16) and sizes[0] > sizes[1] + 400


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
        vgym.register("vfgym-vector-test/PerStep-v0", "wordle", per_step_reward="no")
    assert gym.registry.get("vfgym-vector-test/PerStep-v0") is None
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


ASYNC_GUESS = "vfgym-test/AsyncGuess-v0"  # hooks that really wait: async mode uses a loop


def _async_vector(n: int = 2) -> GymVectorEnv:
    return gym.make_vec(ASYNC_GUESS, num_envs=n, mode="async")


def _playing(mode: str = "sync") -> GymVectorEnv:
    """A vector env two steps into its episodes."""
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2, mode=mode)
    vec.reset(seed=0)
    vec.step(["1", "2"])
    return vec


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
