"""The async play helpers (`aplay_episode`, `aplay_vector`) and how infos leave vector
workers: the caller's loop stays free, a failing policy call cancels the other sub-envs'
calls, a policy that takes no observation is refused before reset, and messages a worker
wrapper changed in place arrive changed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import openai
import pytest
from gym_test_envs import GuessEnv, LoopHeldGuessEnv, bisect_policy
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import vfgym.gym as vgym
from vfgym.gym import aplay_episode, aplay_vector
from vfgym.types import Messages, State

# ------------------------------------------------- env hooks that wait on the caller's loop


class AskingGuessEnv(GuessEnv):
    """`GuessEnv` whose every turn first asks a model server (as an HTTP judge or a hint
    model would) before answering. The server may run on the caller's own event loop."""

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        self.base_url = base_url
        super().__init__(**kwargs)

    async def env_response(
        self, messages: Messages, state: State, **kwargs: Any
    ) -> tuple[Any, State]:
        # A short timeout: a loop that cannot serve the request fails the turn, not the run.
        client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key="test", max_retries=0, timeout=5.0
        )
        async with client:
            remark = await client.chat.completions.create(
                model="judge", messages=[{"role": "user", "content": "a remark?"}]
            )
        state["remarks"] = state.get("remarks", 0) + 1
        assert remark.choices[0].message.content == "fine"
        return GuessEnv.env_response(self, messages, state)


ASKING_ID = "vfgym-play-test/AskingGuess-v0"


@pytest.fixture(scope="module", autouse=True)
def _asking_id() -> Iterator[None]:
    vgym.register(ASKING_ID, AskingGuessEnv)
    yield
    gym.registry.pop(ASKING_ID, None)


async def _judge(model_server: Any) -> str:
    server = await model_server(lambda messages: "fine")
    return str(server.base_url)


def _played_out(trajectory: vgym.Trajectory) -> None:
    assert trajectory.done and trajectory.length >= 1
    assert trajectory.state["remarks"] == trajectory.length


async def test_aplay_episode_over_a_wrapped_env_leaves_the_callers_loop_free(model_server):
    """A wrapped env (here `TimeLimit`, from `max_episode_steps`) has no `astep`, so
    `aplay_episode` stepped it with the sync `step` on the caller's loop: the loop stood
    still for the whole step, and a hook waiting on a server of that loop timed out."""
    env = gym.make(ASKING_ID, base_url=await _judge(model_server), max_episode_steps=10)
    try:
        assert not isinstance(env, vgym.GymEnv)
        trajectory = await aplay_episode(env, bisect_policy, seed=0)
    finally:
        env.close()
    _played_out(trajectory)


def _vector(how: str, base_url: str) -> gym.vector.VectorEnv:
    if how == "wrapped":  # vfgym's own vector env under a Gymnasium wrapper
        return RecordEpisodeStatistics(gym.make_vec(ASKING_ID, num_envs=2, base_url=base_url))
    return gym.make_vec(ASKING_ID, num_envs=2, vectorization_mode=how, base_url=base_url)


@pytest.mark.parametrize("how", ["wrapped", "sync", "async"])
async def test_aplay_vector_over_other_vector_envs_leaves_the_callers_loop_free(model_server, how):
    """The same for `aplay_vector` over a wrapped `GymVectorEnv` and over Gymnasium's
    `SyncVectorEnv` and `AsyncVectorEnv` (whose worker processes ask the server too)."""
    vec_env = _vector(how, await _judge(model_server))
    try:
        trajectories = await aplay_vector(vec_env, bisect_policy, seed=0, episodes=3)
    finally:
        vec_env.close()
    assert len(trajectories) == 3
    for trajectory in trajectories:
        _played_out(trajectory)


# ------------------------------------------------------------ a policy call that fails


async def test_a_failing_policy_call_cancels_the_other_sub_envs_calls():
    """When one sub-env's policy call raised, `aplay_vector` raised at once but left the
    other sub-envs' calls running: model requests went on after the helper had returned
    (and ended their episodes), their answers thrown away."""
    calls: list[str] = []
    outcomes: list[str] = []
    others_waiting = asyncio.Event()

    async def policy(observation: str) -> str:
        calls.append(observation)
        if len(calls) == 1:  # the first sub-env's call fails once the others are waiting
            await others_waiting.wait()
            raise ValueError("the model server is gone")
        if len(calls) == 3:
            others_waiting.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            outcomes.append("cancelled")
            raise
        outcomes.append("finished")
        return "1"

    vec_env = gym.make_vec("vfgym-test/Guess-v0", num_envs=3)
    try:
        with pytest.raises(ValueError, match="the model server is gone"):
            await aplay_vector(vec_env, policy, seed=0)
        assert outcomes == ["cancelled", "cancelled"]  # at once, not 30 s later
    finally:
        vec_env.close()


# ------------------------------------------------ infos leaving an AsyncVectorEnv worker


class NoteInMessages(gym.Wrapper):
    """A wrapper (in the worker, around each sub-env) that adds a note for the policy to
    `info["messages"]` in place."""

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        info["messages"].append({"role": "user", "content": f"note {info['turn']}"})
        return observation, reward, terminated, truncated, info


@pytest.mark.parametrize("how", ["sync", "async"])
def test_messages_a_worker_wrapper_changed_in_place_arrive_changed(how):
    """Across an `AsyncVectorEnv`'s pipe, `info["messages"]` went as a reference to the
    State and was rebuilt from it: whatever a wrapper had done to the list was lost, where
    `SyncVectorEnv` (and the env itself) gave it."""
    vec_env = gym.make_vec(
        "vfgym-test/Guess-v0", num_envs=2, vectorization_mode=how, wrappers=[NoteInMessages]
    )
    try:
        observations, _ = vec_env.reset(seed=5)
        for turn in (1, 2):
            actions = tuple(bisect_policy(observation) for observation in observations)
            observations, _, _, _, infos = vec_env.step(actions)
            for i in range(2):
                messages, state = infos["messages"][i], infos["state"][i]
                assert messages[-1] == {"role": "user", "content": f"note {turn}"}
                assert messages[:-1] == state["prompt"] + state["completion"]
                assert messages[-1] not in state["completion"]  # the State is the env's
    finally:
        vec_env.close()


# ------------------------------------------------------------------ policy forms


def _no_arguments() -> str:
    return "10"


def _keyword_only(*, observation: str = "") -> str:
    return "10"


@pytest.mark.parametrize("policy", [_no_arguments, _keyword_only], ids=["none", "keyword-only"])
def test_a_policy_that_takes_no_observation_is_refused_before_reset(policy):
    """A policy that cannot take the observation positionally was called anyway, after the
    reset had started an episode, and failed with Python's bare 'takes 0 positional
    arguments but 1 was given'."""
    env = vgym.GymEnv(GuessEnv())
    vec_env = gym.make_vec("vfgym-test/Guess-v0", num_envs=2)
    try:
        with pytest.raises(TypeError, match=r"takes no positional argument.*policy\(observation"):
            vgym.play_episode(env, policy, seed=0)
        with pytest.raises(TypeError, match=r"takes no positional argument.*policy\(observation"):
            vgym.play_vector(vec_env, policy, seed=0)
        assert env.state is None  # no episode was started
        assert vgym.play_episode(env, lambda *observation: "10", seed=0, max_steps=1).length == 1
    finally:
        env.close()
        vec_env.close()


# ------------------------------------------- aplay_episode after an episode of reset()


def test_aplay_episode_ends_an_episode_left_by_play_episode_where_it_runs():
    """`play_episode(..., max_steps=...)` leaves its episode running on the env's own
    loop; `aplay_episode` then refused to start ("call reset() ... not areset()", a call
    the user never made), though `play_episode` with an async policy ends such an episode
    first, as any reset does."""
    env = vgym.GymEnv(LoopHeldGuessEnv())
    try:
        first = vgym.play_episode(env, lambda observation: "5", seed=0, max_steps=1)
        assert not first.done

        async def policy(observation: str) -> str:
            await asyncio.sleep(0)
            return bisect_policy(observation)

        second = asyncio.run(aplay_episode(env, policy, seed=1))
        assert second.done and first.state["released_on"] == id(env._loop)
        assert first.state.get("cleanup_error") is None
    finally:
        env.close()
