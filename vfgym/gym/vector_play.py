"""`play_vector` and `aplay_vector`: play a Gymnasium vector env with a policy until
the wanted number of episodes has finished.

They follow the vector env's autoreset mode (NEXT_STEP: the step after an episode
ends resets that sub-env and ignores its action; SAME_STEP: the batch already holds
the next episode's start; DISABLED: a manual reset of the ended sub-envs), record one
`Trajectory` per episode (`_VectorEpisodes`), and, when they return or raise, end the
episodes a `GymVectorEnv` still runs on the loop they started on. See
`vfgym.gym.play` for policies and the async rules.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vfgym.engine._async import is_async_callable, maybe_await, run_sync
from vfgym.gym.playing import (
    Policy,
    PolicyCall,
    Trajectory,
    async_calls,
    checked_count,
    policy_call,
    record_step,
    sync_action,
)
from vfgym.gym.vector import GymVectorEnv


def _check_vector(vec_env: Any) -> None:
    """`play_vector` needs the vector API; a single env would fail on `num_envs`."""
    if not isinstance(vec_env, gym.vector.VectorEnv):
        raise TypeError(
            f"play_vector plays a Gymnasium vector env (gym.make_vec), but got "
            f"{type(vec_env).__name__}; use play_episode (or aplay_episode) for a single env"
        )


def unbatch_info(infos: dict[str, Any] | list[dict[str, Any]], index: int) -> dict[str, Any]:
    """The info of sub-env `index` out of a vector env's batched info dict, or out of
    the list of per-sub-env dicts that `gymnasium.wrappers.vector.DictInfoToList` gives."""
    if isinstance(infos, list):
        return infos[index]
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[index]:
            continue
        if isinstance(value, dict):
            out[key] = unbatch_info(value, index)
        else:
            item = value[index]
            out[key] = item.item() if isinstance(item, np.generic) else item
    return out


class _VectorEpisodes:
    """Bookkeeping of `play_vector`: which sub-env is in which episode, and when to stop."""

    def __init__(self, num_envs: int, mode: AutoresetMode, episodes: int) -> None:
        self.num_envs = num_envs
        self.mode = mode
        self.wanted = episodes
        self.started = 0
        self.finished: list[Trajectory] = []
        self.current: list[Trajectory | None] = [None] * num_envs
        self.resetting = np.zeros(num_envs, dtype=bool)

    @property
    def complete(self) -> bool:
        return len(self.finished) >= self.wanted

    def start(self, index: int, observation: Any, info: dict[str, Any]) -> None:
        if self.started < self.wanted:
            self.current[index] = Trajectory(observations=[observation], infos=[info])
            self.started += 1
        else:
            self.current[index] = None

    def on_reset(self, observations: Any, infos: dict[str, Any]) -> None:
        for i in range(self.num_envs):
            self.start(i, observations[i], unbatch_info(infos, i))

    def info(self, index: int) -> dict[str, Any]:
        """The info that came with the observation an active sub-env's policy sees next
        (the last one its trajectory recorded)."""
        trajectory = self.current[index]
        assert trajectory is not None, "only active sub-envs have an info to hand out"
        return trajectory.infos[-1]

    def active(self) -> list[int]:
        return [
            i for i in range(self.num_envs) if self.current[i] is not None and not self.resetting[i]
        ]

    def on_step(
        self,
        actions: list[Any],
        observations: Any,
        rewards: Any,
        terminations: Any,
        truncations: Any,
        infos: dict[str, Any],
    ) -> np.ndarray:
        """Record one vector step; returns the mask of sub-envs that need a manual reset."""
        needs_reset = np.zeros(self.num_envs, dtype=bool)
        for i in range(self.num_envs):
            if self.resetting[i]:  # NEXT_STEP: this step was the sub-env's reset
                self.resetting[i] = False
                self.start(i, observations[i], unbatch_info(infos, i))
                continue
            trajectory = self.current[i]
            done = bool(terminations[i] or truncations[i])
            info = unbatch_info(infos, i)
            observation = observations[i]
            if done and self.mode == AutoresetMode.SAME_STEP:
                # The batch already holds the next episode's start; the end is in final_*.
                # Copies: under DictInfoToList `info` is the wrapper's own dict.
                next_observation, next_info = observation, dict(info)
                next_info.pop("final_obs", None)
                next_info.pop("final_info", None)
                info = dict(info)
                observation = info.pop("final_obs", observation)
                final_info = info.pop("final_info", None)
                info = final_info if isinstance(final_info, dict) else info
            if trajectory is not None:
                record_step(
                    trajectory,
                    actions[i],
                    observation,
                    rewards[i],
                    terminations[i],
                    truncations[i],
                    info,
                )
                if done:
                    self.finished.append(trajectory)
                    self.current[i] = None
            if not done:
                continue
            if self.mode == AutoresetMode.NEXT_STEP:
                self.resetting[i] = True
            elif self.mode == AutoresetMode.SAME_STEP:
                self.start(i, next_observation, next_info)
            else:
                needs_reset[i] = True
        return needs_reset


def _autoreset_mode(vec_env: gym.vector.VectorEnv) -> AutoresetMode:
    mode = vec_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


def _new_book(vec_env: gym.vector.VectorEnv, episodes: int | None) -> _VectorEpisodes:
    """The bookkeeping of one `play_vector` run; `episodes` is already checked (>= 1)."""
    wanted = vec_env.num_envs if episodes is None else episodes
    return _VectorEpisodes(vec_env.num_envs, _autoreset_mode(vec_env), wanted)


def _vector_actions(book: _VectorEpisodes, chosen: dict[int, Any]) -> list[Any]:
    # Sub-envs that are resetting or not being recorded get an empty turn: an
    # autoreset step ignores it, and an unrecorded episode's moves do not matter.
    return [chosen.get(i, "") for i in range(book.num_envs)]


def play_vector(
    vec_env: gym.vector.VectorEnv,
    policy: Policy,
    *,
    seed: int | None = None,
    episodes: int | None = None,
) -> list[Trajectory]:
    """Play `episodes` episodes (an int >= 1; default: one per sub-env) over a vector env.

    The policy sees one sub-env's observation at a time, called as
    `policy(observation)` or, when it requires two positional parameters,
    `policy(observation, info)` with that sub-env's own unbatched info — whose
    `info["messages"]` is the sub-env's whole conversation, which is what a policy
    that keeps history needs, as calls for different sub-envs interleave. An
    `async def` policy's calls for all sub-envs of a step run concurrently; a plain
    function that returns an awaitable is refused with a TypeError. Trajectories
    are returned in the order they finished. The episodes a `GymVectorEnv` still
    runs at the end are ended (see the module docstring): reset it before stepping.
    """
    call = policy_call(policy)
    episodes = checked_count("episodes", episodes)
    _check_vector(vec_env)
    if is_async_callable(policy):
        return run_sync(aplay_vector(vec_env, policy, seed=seed, episodes=episodes))
    try:
        finished = _play_vector(vec_env, call, seed, episodes)
    except BaseException:  # Ctrl-C in the policy too
        _end_left_running(vec_env, after_error=True)
        raise
    _end_left_running(vec_env, after_error=False)
    return finished


def _play_vector(
    vec_env: gym.vector.VectorEnv, call: PolicyCall, seed: int | None, episodes: int | None
) -> list[Trajectory]:
    """`play_vector`'s episodes, once its arguments are checked."""
    book = _new_book(vec_env, episodes)
    observations, infos = vec_env.reset(seed=seed)
    book.on_reset(observations, infos)
    while not book.complete:
        chosen = {i: sync_action(call, observations[i], book.info(i)) for i in book.active()}
        actions = _vector_actions(book, chosen)
        observations, *rest = vec_env.step(tuple(actions))
        observations = _after_step(vec_env, book, actions, observations, *rest)
    return book.finished


async def aplay_vector(
    vec_env: gym.vector.VectorEnv,
    policy: Policy,
    *,
    seed: int | None = None,
    episodes: int | None = None,
) -> list[Trajectory]:
    """`play_vector` for asyncio code: the policy's calls of one step run concurrently,
    and a `GymVectorEnv` is driven with `areset`/`astep` on the caller's loop (another
    vector env whose steps may wait is stepped in a worker thread, as in `aplay_episode`).
    When a policy call raises, the step's other calls are cancelled.

    The policy takes `(observation)` or `(observation, info)`, as in `play_vector`;
    whatever it returns that is awaitable is awaited. The episodes a `GymVectorEnv`
    still runs at the end are ended on their loops, as `play_vector` does.
    """
    call = policy_call(policy)
    episodes = checked_count("episodes", episodes)
    _check_vector(vec_env)
    try:
        finished = await _aplay_vector(vec_env, call, seed, episodes)
    except BaseException:  # cancelled (asyncio.wait_for, Ctrl-C in asyncio.run) too
        await _aend_left_running(vec_env, after_error=True)
        raise
    await _aend_left_running(vec_env, after_error=False)
    return finished


async def _aplay_vector(
    vec_env: gym.vector.VectorEnv, call: PolicyCall, seed: int | None, episodes: int | None
) -> list[Trajectory]:
    """`aplay_vector`'s episodes, once its arguments are checked."""
    book = _new_book(vec_env, episodes)
    areset, astep = async_calls(vec_env)
    observations, infos = await areset(seed=seed)
    book.on_reset(observations, infos)
    while not book.complete:
        actions = _vector_actions(book, await _decide(call, book, observations))
        observations, *rest = await astep(tuple(actions))
        needs_reset = book.on_step(actions, observations, *rest)
        observations = list(observations)
        if needs_reset.any() and not book.complete:  # AutoresetMode.DISABLED
            fresh, fresh_infos = await areset(options={"reset_mask": needs_reset})
            _restart(book, needs_reset, observations, fresh, fresh_infos)
    return book.finished


async def _decide(call: PolicyCall, book: _VectorEpisodes, observations: Any) -> dict[int, Any]:
    """The actions of the active sub-envs, their policy calls run concurrently.

    When one raises, the others are cancelled (and awaited while they unwind) before
    the error goes on: left running, they would keep asking a model after the helper
    returned, about episodes it has ended."""
    active = book.active()
    tasks = [
        asyncio.ensure_future(maybe_await(call, observations[i], book.info(i))) for i in active
    ]
    try:
        decided = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return dict(zip(active, decided, strict=True))


def _end_left_running(vec_env: gym.vector.VectorEnv, *, after_error: bool) -> None:
    """End the episodes a `GymVectorEnv` still runs once play is over. After an error
    that error is the one to see: a failure to end them is then left unraised (the
    episodes stay running, and the vector env says so on its next call)."""
    vec = _gym_vector(vec_env)
    if vec is None:
        return
    with contextlib.suppress(Exception) if after_error else contextlib.nullcontext():
        vec.end_episodes()


async def _aend_left_running(vec_env: gym.vector.VectorEnv, *, after_error: bool) -> None:
    """`_end_left_running` for `aplay_vector`: on the caller's loop."""
    vec = _gym_vector(vec_env)
    if vec is None:
        return
    with contextlib.suppress(Exception) if after_error else contextlib.nullcontext():
        await vec.aend_episodes()


def _gym_vector(vec_env: gym.vector.VectorEnv) -> GymVectorEnv | None:
    """The open `GymVectorEnv` under `vec_env`'s wrappers, if that is what it is."""
    vec = getattr(vec_env, "unwrapped", vec_env)
    return vec if isinstance(vec, GymVectorEnv) and not vec.closed else None


def _after_step(
    vec_env: gym.vector.VectorEnv,
    book: _VectorEpisodes,
    actions: list[Any],
    observations: Any,
    rewards: Any,
    terminations: Any,
    truncations: Any,
    infos: dict[str, Any],
) -> list[Any]:
    """Record the step; with autoreset DISABLED, reset the finished sub-envs by hand.

    Returns the observations the policy sees next.
    """
    needs_reset = book.on_step(actions, observations, rewards, terminations, truncations, infos)
    observations = list(observations)
    if needs_reset.any() and not book.complete:  # AutoresetMode.DISABLED
        fresh, fresh_infos = vec_env.reset(options={"reset_mask": needs_reset})
        _restart(book, needs_reset, observations, fresh, fresh_infos)
    return observations


def _restart(
    book: _VectorEpisodes,
    needs_reset: np.ndarray,
    observations: list[Any],
    fresh: Any,
    fresh_infos: dict[str, Any],
) -> None:
    """Start the episodes of the sub-envs just reset by hand (autoreset DISABLED)."""
    for i in np.flatnonzero(needs_reset):
        observations[i] = fresh[i]
        book.start(int(i), fresh[i], unbatch_info(fresh_infos, int(i)))
