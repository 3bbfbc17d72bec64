"""GymVectorEnv: the same episodes as Gymnasium's vector envs, concurrency, errors, close."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gym_test_envs import SYSTEM, BrokenEnv, GuessEnv, bisect_policy
from gymnasium.vector import AutoresetMode

import vfgym.gym as vgym
from vfgym.errors import SubEnvError
from vfgym.gym import GymEnv, GymVectorEnv, aplay_vector, play_vector, unbatch_info
from vfgym.types import Messages, State

AUTORESET_MODES = list(AutoresetMode)


class SleepyGuessEnv(GuessEnv):
    """`GuessEnv` whose answer waits 10 ms on the event loop, logging when it ran."""

    def __init__(self, log: list[tuple[str, float, float]], **kwargs: Any) -> None:
        self.log = log
        super().__init__(**kwargs)

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        started = time.monotonic()
        await asyncio.sleep(0.01)
        state["loop_seen"] = id(asyncio.get_running_loop())
        self.log.append(("step", started, time.monotonic()))
        return GuessEnv.env_response(self, messages, state)

    async def cleanup_state(self, state: State, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        self.events.append(("cleanup", state["example_id"]))
        state["cleaned_on"] = id(asyncio.get_running_loop())


def _sleepy(n: int, mode: str, log: list | None = None) -> GymVectorEnv:
    log = [] if log is None else log
    return GymVectorEnv([lambda: GymEnv(SleepyGuessEnv(log)) for _ in range(n)], mode=mode)


# ------------------------------------------------------------------ basics


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_vector_env_as_gymnasium_defines_one(mode):
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=3, mode=mode)
    try:
        assert isinstance(vec, GymVectorEnv) and isinstance(vec, gym.vector.VectorEnv)
        assert vec.num_envs == 3 and vec.mode == mode
        assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        assert vec.single_observation_space == vgym.UnicodeText(vgym.DEFAULT_MAX_TEXT_LENGTH)
        assert vec.observation_space == gym.vector.utils.batch_space(
            vec.single_observation_space, 3
        )
        assert vec.action_space == gym.vector.utils.batch_space(vec.single_action_space, 3)
        assert vec.spec is not None and vec.spec.id == "vfgym-test/Guess-v0"
        observations, infos = vec.reset(seed=0)
        assert isinstance(observations, tuple) and observations in vec.observation_space
        assert infos["_state"].tolist() == [True] * 3 and infos["turn"].tolist() == [0] * 3
        vec.action_space.seed(0)
        observations, rewards, terminated, truncated, infos = vec.step(vec.action_space.sample())
        assert observations in vec.observation_space
        assert rewards.dtype == np.float64 and rewards.shape == (3,)
        assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
        assert infos["turn"].tolist() == [1] * 3 and infos["turn"].dtype == np.int64
        assert isinstance(infos["state"][0], vgym.StateView)
        assert unbatch_info(infos, 1)["messages"][-2]["role"] == "assistant"
        assert repr(vec) == f"GymVectorEnv(vfgym-test/Guess-v0, num_envs=3, mode={mode!r})"
    finally:
        vec.close()
    assert vec.closed


def test_make_vec_picks_it_by_default_and_gymnasiums_on_request():
    for kwargs in ({}, {"vectorization_mode": "vector_entry_point", "mode": "async"}):
        vec = gym.make_vec("vfgym/GuessTheNumber-v0", num_envs=2, num_examples=5, **kwargs)
        assert isinstance(vec, GymVectorEnv) and vec.mode == kwargs.get("mode", "sync")
        vec.close()
    vec = gym.make_vec("vfgym/GuessTheNumber-v0", num_envs=2, vectorization_mode="sync")
    assert isinstance(vec, gym.vector.SyncVectorEnv)
    vec.close()


def test_seeds_follow_gymnasium_an_int_seeds_sub_env_i_with_seed_plus_i():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=3)
    singles = [gym.make("vfgym-test/Guess-v0") for _ in range(3)]
    try:
        observations, _ = vec.reset(seed=10)
        assert list(observations) == [env.reset(seed=10 + i)[0] for i, env in enumerate(singles)]
        assert vec.np_random_seed == (10, 11, 12)
        observations, _ = vec.reset(seed=[5, None, 7])
        assert observations[0] == singles[0].reset(seed=5)[0]
        assert observations[2] == singles[2].reset(seed=7)[0]
        with pytest.raises(ValueError, match="2 seeds for 3 sub-envs"):
            vec.reset(seed=[1, 2])
    finally:
        vec.close()
        for env in singles:
            env.close()


def test_reset_mask_resets_only_the_chosen_sub_envs():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=3)
    try:
        vec.reset(seed=0)
        stepped, *_ = vec.step(("4", "4", "4"))
        options = {"reset_mask": np.array([False, True, False])}
        observations, infos = vec.reset(options=options)
        assert "reset_mask" in options  # the caller's dict is left as it was
        assert observations[0] == stepped[0] and observations[2] == stepped[2]
        assert "between 1 and 20" in observations[1]
        assert infos["_turn"].tolist() == [False, True, False]
        with pytest.raises(ValueError, match="at least one"):
            vec.reset(options={"reset_mask": np.zeros(3, dtype=bool)})
        with pytest.raises(TypeError, match="numpy array"):
            vec.reset(options={"reset_mask": [True, False, True]})
    finally:
        vec.close()


def test_render_gives_every_sub_envs_text():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2, render_mode="ansi")
    try:
        vec.reset(seed=0)
        vec.step(("5", "6"))
        frames = vec.render()
        assert len(frames) == 2 and "board: guesses=[5]" in frames[0] and "[6]" in frames[1]
        assert vec.get_attr("render_mode") == ("ansi", "ansi")
    finally:
        vec.close()


# ------------------------------------------- the same episodes as Gymnasium's


def _batch_summary(infos: dict[str, Any]) -> dict[str, Any]:
    """Every batched info entry as (dtype, values); States compare as StateViews do."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if isinstance(value, dict):
            out[key] = _batch_summary(value)
        else:
            out[key] = (str(value.dtype), value.tolist())
    return out


def _trajectory(vec: gym.vector.VectorEnv, steps: int) -> list[Any]:
    """reset(seed) then `steps` steps of the bisect policy; DISABLED resets by hand."""
    record = []
    observations, infos = vec.reset(seed=3)
    record.append((observations, _batch_summary(infos)))
    for _ in range(steps):
        actions = tuple(bisect_policy(o) for o in observations)
        observations, rewards, terminated, truncated, infos = vec.step(actions)
        record.append(
            (
                tuple(observations),
                rewards.tolist(),
                terminated.tolist(),
                truncated.tolist(),
                _batch_summary(infos),
            )
        )
        ended = terminated | truncated
        if vec.metadata["autoreset_mode"] is AutoresetMode.DISABLED and ended.any():
            observations, infos = vec.reset(options={"reset_mask": ended})
            record.append(("reset", tuple(observations), _batch_summary(infos)))
    return record


def _made(gym_id: str, how: str, autoreset: AutoresetMode) -> gym.vector.VectorEnv:
    if how in ("sync", "async"):  # Gymnasium's SyncVectorEnv and AsyncVectorEnv
        return gym.make_vec(
            gym_id,
            num_envs=3,
            vectorization_mode=how,
            vector_kwargs={"autoreset_mode": autoreset},
        )
    return gym.make_vec(
        gym_id, num_envs=3, mode=how.removeprefix("vfgym-"), autoreset_mode=autoreset
    )


class WaitingGuessEnv(GuessEnv):
    """`GuessEnv` whose answer suspends on the event loop (and so needs one)."""

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        await asyncio.sleep(0)
        return GuessEnv.env_response(self, messages, state)


def load_waiting_guess(**kwargs: Any) -> WaitingGuessEnv:
    return WaitingGuessEnv(**kwargs)


@pytest.fixture(scope="module")
def waiting_id():
    vgym.register("vfgym-test/WaitingGuess-v0", load_waiting_guess)
    yield "vfgym-test/WaitingGuess-v0"
    gym.registry.pop("vfgym-test/WaitingGuess-v0", None)


@pytest.mark.parametrize("autoreset", AUTORESET_MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("waits", [False, True], ids=["sync-hooks", "async-hooks"])
def test_trajectories_equal_gymnasiums_sync_and_async_vector_envs(waits, autoreset, waiting_id):
    """Observations, rewards, terminations, truncations and every batched info entry
    (State, messages, turn, stop reason, episode reward, metrics, final_obs/final_info,
    and the masks) match step by step across all four vector envs."""
    gym_id = waiting_id if waits else "vfgym-test/Guess-v0"
    runs = {}
    for how in ("sync", "async", "vfgym-sync", "vfgym-async"):
        vec = _made(gym_id, how, autoreset)
        try:
            runs[how] = _trajectory(vec, 14)
        finally:
            vec.close()
    reference = runs.pop("sync")
    assert any(step[2] != [False] * 3 for step in reference[1:] if step[0] != "reset")
    for how, run in runs.items():
        assert run == reference, how
    vec = _made(gym_id, "vfgym-async", autoreset)
    assert any(env.needs_loop for env in vec.envs) is waits  # both paths covered
    vec.close()


def test_max_episode_steps_truncates_as_gymnasiums_time_limit():
    vgym.register("vfgym-test/GuessLimited-v0", GuessEnv, max_episode_steps=2)
    try:
        runs = [
            _trajectory(_made("vfgym-test/GuessLimited-v0", how, AutoresetMode.NEXT_STEP), 7)
            for how in ("sync", "vfgym-sync")
        ]
        assert runs[0] == runs[1]
        assert runs[0][2][3] == [True] * 3  # truncated at the second step
    finally:
        gym.registry.pop("vfgym-test/GuessLimited-v0", None)


def test_play_vector_and_aplay_vector_play_the_same_episodes():
    def summary(trajectories):
        return sorted((tuple(t.observations), tuple(t.rewards)) for t in trajectories)

    reference = gym.make_vec("vfgym-test/Guess-v0", num_envs=3, vectorization_mode="sync")
    ours = gym.make_vec("vfgym-test/AsyncGuess-v0", num_envs=3, mode="async")
    try:
        expected = summary(play_vector(reference, bisect_policy, seed=7, episodes=5))
        assert summary(play_vector(ours, bisect_policy, seed=7, episodes=5)) == expected
        played = asyncio.run(aplay_vector(ours, bisect_policy, seed=7, episodes=5))
        assert summary(played) == expected
    finally:
        reference.close()
        ours.close()


# ------------------------------------------------------------------ async


def test_async_mode_overlaps_the_sub_envs_waits_on_one_loop():
    log: list[tuple[str, float, float]] = []
    vec = _sleepy(8, "async", log)
    try:
        vec.reset(seed=0)
        vec.step(("0",) * 8)  # never the number: the episodes go on
        steps = [(start, end) for kind, start, end in log if kind == "step"]
        assert len(steps) == 8
        # Every wait began before any ended: all eight were in flight together.
        assert max(start for start, _ in steps) < min(end for _, end in steps)
        loops = {view["loop_seen"] for view in vec.step(("0",) * 8)[4]["state"]}
        assert len(loops) == 1  # one event loop for all sub-envs, the same every step
        assert loops == {id(vec._loop)}
    finally:
        vec.close()


def test_sync_mode_steps_one_sub_env_after_another():
    log: list[tuple[str, float, float]] = []
    vec = _sleepy(3, "sync", log)
    try:
        vec.reset(seed=0)
        vec.step(("0",) * 3)
        steps = sorted((start, end) for kind, start, end in log if kind == "step")
        assert len(steps) == 3
        assert all(steps[i][1] <= steps[i + 1][0] for i in range(2))  # no overlap
    finally:
        vec.close()


def test_async_mode_steps_envs_that_never_wait_inline():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=2, mode="async")
    try:
        vec.reset(seed=0)
        vec.step(("3", "3"))
        assert vec._loop is None  # nothing to overlap: no event loop was made
        assert not any(env.needs_loop for env in vec.envs)
    finally:
        vec.close()
    waiting = gym.make_vec("vfgym-test/AsyncGuess-v0", num_envs=2, mode="async")
    assert all(env.needs_loop for env in waiting.envs)
    waiting.close()


async def test_astep_and_areset_run_on_the_callers_loop():
    log: list[tuple[str, float, float]] = []
    vec = _sleepy(4, "async", log)
    try:
        observations, _ = await vec.areset(seed=0)
        *_, infos = await vec.astep(tuple(bisect_policy(o) for o in observations))
        here = id(asyncio.get_running_loop())
        assert {view["loop_seen"] for view in infos["state"]} == {here}
        steps = [(start, end) for kind, start, end in log if kind == "step"]
        assert max(start for start, _ in steps) < min(end for _, end in steps)
    finally:
        await vec.aclose()
    assert vec.closed
    assert all(env.environment.events[-1][0] == "cleanup" for env in vec.envs)
    assert {env.state["cleaned_on"] for env in vec.envs} == {here}


async def test_sync_step_inside_a_running_loop_uses_the_same_private_loop():
    vec = _sleepy(2, "async")
    try:
        vec.reset(seed=0)
        first = vec.step(("0", "0"))[4]["state"][0]["loop_seen"]
        second = vec.step(("0", "0"))[4]["state"][0]["loop_seen"]
        assert first == second == id(vec._loop)
        assert first != id(asyncio.get_running_loop())
    finally:
        vec.close()


# ------------------------------------------------------------------ close


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("factory", [GuessEnv, SleepyGuessEnv])
def test_close_runs_each_running_episodes_cleanup(mode, factory):
    made = [factory([]) if factory is SleepyGuessEnv else factory() for _ in range(3)]
    vec = GymVectorEnv([GymEnv(env) for env in made], mode=mode)
    vec.reset(seed=1)
    vec.step(("0", "0", "0"))  # never the number: the episodes go on
    assert not any(kind == "cleanup" for env in made for kind, _ in env.events)
    vec.close()
    for env in made:
        assert [kind for kind, _ in env.events] == ["setup", "cleanup"]
    vec.close()  # a second close does nothing
    assert all(len(env.events) == 2 for env in made)
    with pytest.raises(RuntimeError, match="closed"):
        vec.step(("1", "1", "1"))


# ------------------------------------------------------------------ errors


def test_bad_construction_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"mode must be 'sync'.*or 'async'"):
        GymVectorEnv([GymEnv(GuessEnv())], mode="threads")
    with pytest.raises(ValueError, match="at least one sub-env"):
        GymVectorEnv([])
    with pytest.raises(ValueError, match="num_envs must be an int >= 1"):
        gym.make_vec("vfgym-test/Guess-v0", num_envs=0)
    with pytest.raises(ValueError, match="autoreset_mode must be"):
        GymVectorEnv([GymEnv(GuessEnv())], autoreset_mode="Sometimes")
    wrapped = gym.make("vfgym-test/Guess-v0", max_episode_steps=3)  # in a TimeLimit
    with pytest.raises(TypeError, match=r"gym.make wraps its env: use gym.make_vec"):
        GymVectorEnv([wrapped])
    wrapped.close()
    env = GymEnv(GuessEnv())
    with pytest.raises(ValueError, match="same GymEnv object"):
        GymVectorEnv([env, env])
    with pytest.raises(ValueError, match="share one observation_mode"):
        GymVectorEnv([GymEnv(GuessEnv()), GymEnv(GuessEnv(), observation_mode="messages")])


def test_bad_steps_are_refused_before_any_sub_env_moves():
    vec = gym.make_vec("vfgym-test/Guess-v0", num_envs=3)
    try:
        with pytest.raises(gym.error.ResetNeeded, match=r"call reset\(\) before step\(\)"):
            vec.step(("1", "2", "3"))
        vec.reset(seed=0)
        with pytest.raises(ValueError, match="2 actions for 3 sub-envs; pass one per sub-env"):
            vec.step(("1", "2"))
        with pytest.raises(TypeError, match=r"one action per sub-env.*not a single str"):
            vec.step("123")
        with pytest.raises(ValueError, match="role must be 'assistant'"):
            vec.step(("1", "2", {"role": "user", "content": "3"}))
        assert vec.get_attr("state")[0]["turn"] == 0  # nothing moved
    finally:
        vec.close()


def test_disabled_autoreset_wants_the_ended_sub_envs_reset():
    vec = gym.make_vec("vfgym-test/QA-v0", num_envs=2, autoreset_mode="Disabled")
    try:
        vec.reset(seed=0)
        _, _, terminated, _, _ = vec.step(("1", "2"))
        assert terminated.all()
        with pytest.raises(gym.error.ResetNeeded, match=r"sub-env\(s\) \[0, 1\] ended.*reset_mask"):
            vec.step(("1", "2"))
        vec.reset(options={"reset_mask": np.array([True, True])})
        vec.step(("1", "2"))
    finally:
        vec.close()


class WaitingBrokenEnv(BrokenEnv):
    """`BrokenEnv` whose answer suspends on the event loop first."""

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        await asyncio.sleep(0)
        return BrokenEnv.env_response(self, messages, state)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("broken", [BrokenEnv, WaitingBrokenEnv])
def test_a_failing_sub_env_says_which_and_the_others_results_are_kept(mode, broken):
    vec = GymVectorEnv(
        [GymEnv(WaitingGuessEnv()), GymEnv(broken()), GymEnv(WaitingGuessEnv())], mode=mode
    )
    try:
        vec.reset(options={"index": 0})  # every sub-env plays row 0: the number is 1
        with pytest.raises(
            SubEnvError, match=r"step\(\) failed in sub-env 1: RuntimeError: .*crashed on 13"
        ) as caught:
            vec.step(("1", "13", "5"))  # sub-env 0 wins in the step that fails
        error = caught.value
        assert isinstance(error, RuntimeError)  # as before SubEnvError existed
        assert error.errors == {1: error.__cause__}
        assert "crashed on 13" in str(error.__cause__)
        observations, rewards, terminated, truncated, infos = error.results
        assert observations[0] == "1 is right!" and observations[2] == "5: go lower."
        assert rewards.tolist() == [1.0, 0.0, 0.0]
        assert terminated.tolist() == [True, False, False]
        assert truncated.tolist() == [False, True, False]  # sub-env 1's episode ended there
        assert infos["_error"].tolist() == [False, True, False]
        assert "crashed on 13" in infos["error"][1] and infos["stop_reason"][1] == "error"
        assert infos["episode_reward"][0] == 1.0
        assert [state["turn"] for state in vec.get_attr("state")] == [1, 1, 1]

        with pytest.raises(gym.error.ResetNeeded, match=r"failed in sub-env.*1: RuntimeError"):
            vec.step(("2", "3", "4"))
        mask = np.array([False, True, False])
        observations, _ = vec.reset(options={"reset_mask": mask, "index": 0})
        assert observations[0] == "1 is right!" and observations[2] == "5: go lower."
        observations, rewards, terminated, _, _ = vec.step(("1", "1", "1"))
        # Sub-env 0 reported its end in `error.results`: now it starts again (NEXT_STEP).
        assert rewards.tolist() == [0.0, 1.0, 1.0]
        assert terminated.tolist() == [False, True, True]
        assert observations[0].startswith(SYSTEM)
    finally:
        vec.close()


def test_a_failing_step_leaves_sync_and_async_modes_in_the_same_place():
    def run(mode: str) -> tuple[Any, ...]:
        vec = GymVectorEnv([GymEnv(WaitingBrokenEnv()) for _ in range(3)], mode=mode)
        try:
            vec.reset(seed=0)
            with pytest.raises(SubEnvError) as caught:
                vec.step(("13", "2", "13"))
            assert sorted(caught.value.errors) == [0, 2]
            observations, rewards, _, truncated, _ = caught.value.results
            turns = [state["turn"] for state in vec.get_attr("state")]
            return observations, rewards.tolist(), truncated.tolist(), turns
        finally:
            vec.close()

    sync, concurrent = run("sync"), run("async")
    assert sync == concurrent
    assert sync[2] == [True, False, True] and sync[3] == [1, 1, 1]


class SetupFailsOnRound3(GuessEnv):
    def setup_state(self, state: State, **kwargs: Any) -> State:
        if state["info"]["round"] == 3:
            raise RuntimeError("no board for round 3")
        return super().setup_state(state, **kwargs)


class WaitingSetupFailsOnRound3(SetupFailsOnRound3, WaitingGuessEnv):
    """Needs an event loop, so async mode really gathers the resets."""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_reset_still_starts_the_others_new_episodes(mode):
    envs = [
        GymEnv(WaitingSetupFailsOnRound3()),
        GymEnv(WaitingSetupFailsOnRound3()),
        GymEnv(WaitingGuessEnv()),
    ]
    vec = GymVectorEnv(envs, mode=mode, max_episode_steps=3)
    try:
        vec.reset(options={"index": 0})
        vec.step(("2", "2", "2"))
        vec.step(("3", "3", "3"))  # two of the three steps used
        with pytest.raises(
            SubEnvError, match=r"reset\(\) failed in sub-env 0.*sub-env 1"
        ) as caught:
            vec.reset(options={"index": 3})
        observations, infos = caught.value.results
        assert "Round 3" in observations[2]
        assert infos["_error"].tolist() == [True, True, False]
        assert "no board for round 3" in infos["error"][0]
        # Sub-env 2's new episode counts its own steps: the limit is three steps away.
        vec.reset(options={"index": 1, "reset_mask": np.array([True, True, False])})
        for _ in range(2):
            truncated = vec.step(("20", "20", "20"))[3]
            assert not truncated.any()
        assert vec.step(("20", "20", "20"))[3].tolist() == [True, True, True]
    finally:
        vec.close()


class EndsThenCannotReset(WaitingGuessEnv):
    """Starts one episode, then refuses every later one."""

    def setup_state(self, state: State, **kwargs: Any) -> State:
        if any(event == "setup" for event, _ in self.events):
            raise RuntimeError("out of boards")
        return super().setup_state(state, **kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_episode_that_ends_before_a_failed_same_step_reset_is_still_reported(mode):
    envs = [GymEnv(EndsThenCannotReset()), GymEnv(WaitingGuessEnv())]
    vec = GymVectorEnv(envs, mode=mode, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        vec.reset(options={"index": 0})
        with pytest.raises(SubEnvError, match="out of boards") as caught:
            vec.step(("1", "2"))
        observations, rewards, terminated, truncated, infos = caught.value.results
        assert observations[0] == "1 is right!" and rewards.tolist() == [1.0, 0.0]
        assert terminated.tolist() == [True, False] and truncated.tolist() == [False, False]
        assert "out of boards" in infos["error"][0] and infos["episode_reward"][0] == 1.0
    finally:
        vec.close()
