"""Playing whole episodes with a policy `(observation) -> action`, sync or async.

`play_episode` drives one env; `play_vector` drives a Gymnasium vector env until
the wanted number of episodes has finished, following the vector env's autoreset
mode (Gymnasium 1.x's default is NEXT_STEP: the step after an episode ends resets
that sub-env and ignores its action). An async policy — a model server client —
is awaited, and over a vector env its calls for all sub-envs run concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vfgym._async import is_async_callable, maybe_await, run_sync
from vfgym.gym.env import GymEnv
from vfgym.gym.vector import GymVectorEnv

Policy = Callable[[Any], Any] | Callable[[Any], Awaitable[Any]]


@dataclass
class Trajectory:
    """One episode: `observations[0]` is the reset observation, then one per step."""

    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False

    @property
    def done(self) -> bool:
        """True when the episode ended (rather than being cut off by `max_steps`)."""
        return self.terminated or self.truncated

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))

    @property
    def length(self) -> int:
        """The number of steps taken."""
        return len(self.actions)

    @property
    def final_info(self) -> dict[str, Any]:
        return self.infos[-1] if self.infos else {}

    @property
    def state(self) -> Any:
        """The State (a read-only view) at the end of the trajectory."""
        return self.final_info.get("state")


def _check_policy(policy: Any) -> None:
    if not callable(policy):
        raise TypeError(
            f"policy must be a callable (observation) -> action, not {type(policy).__name__}"
        )


def play_episode(
    env: gym.Env,
    policy: Policy,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> Trajectory:
    """Reset `env` and play one episode with `policy`; returns the trajectory.

    An async policy is awaited (on a helper loop when called from sync code).
    `max_steps` stops early, leaving the episode running (`Trajectory.done` False).
    """
    _check_policy(policy)
    if is_async_callable(policy):
        return run_sync(aplay_episode(env, policy, seed=seed, options=options, max_steps=max_steps))
    observation, info = env.reset(seed=seed, options=options)
    trajectory = Trajectory(observations=[observation], infos=[info])
    while max_steps is None or trajectory.length < max_steps:
        action = policy(observation)
        observation, reward, terminated, truncated, info = env.step(action)
        _record(trajectory, action, observation, reward, terminated, truncated, info)
        if terminated or truncated:
            break
    return trajectory


async def aplay_episode(
    env: gym.Env,
    policy: Policy,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> Trajectory:
    """`play_episode` for asyncio code; a bare `GymEnv` is driven with `areset`/`astep`."""
    _check_policy(policy)
    direct = isinstance(env, GymEnv)
    if direct:
        observation, info = await env.areset(seed=seed, options=options)
    else:
        observation, info = env.reset(seed=seed, options=options)
    trajectory = Trajectory(observations=[observation], infos=[info])
    while max_steps is None or trajectory.length < max_steps:
        action = await maybe_await(policy, observation)
        if direct:
            result = await env.astep(action)
        else:
            result = env.step(action)
        observation, reward, terminated, truncated, info = result
        _record(trajectory, action, observation, reward, terminated, truncated, info)
        if terminated or truncated:
            break
    return trajectory


def _record(
    trajectory: Trajectory,
    action: Any,
    observation: Any,
    reward: Any,
    terminated: bool,
    truncated: bool,
    info: dict[str, Any],
) -> None:
    trajectory.actions.append(action)
    trajectory.observations.append(observation)
    trajectory.rewards.append(float(reward))
    trajectory.infos.append(info)
    trajectory.terminated = bool(terminated)
    trajectory.truncated = bool(truncated)


# ------------------------------------------------------------------ vector envs


def unbatch_info(infos: dict[str, Any], index: int) -> dict[str, Any]:
    """The info of sub-env `index` out of a vector env's batched info dict."""
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
                next_observation, next_info = observation, dict(info)
                next_info.pop("final_obs", None)
                next_info.pop("final_info", None)
                observation = info.pop("final_obs", observation)
                final_info = info.pop("final_info", None)
                info = final_info if isinstance(final_info, dict) else info
            if trajectory is not None:
                _record(
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
    """Play `episodes` episodes (default: one per sub-env) over a vector env.

    The policy sees one sub-env's observation at a time; an async policy's calls
    for all sub-envs of a step run concurrently. Trajectories are returned in
    the order they finished.
    """
    _check_policy(policy)
    if is_async_callable(policy):
        return run_sync(aplay_vector(vec_env, policy, seed=seed, episodes=episodes))
    book = _VectorEpisodes(vec_env.num_envs, _autoreset_mode(vec_env), episodes or vec_env.num_envs)
    observations, infos = vec_env.reset(seed=seed)
    book.on_reset(observations, infos)
    while not book.complete:
        chosen = {i: policy(observations[i]) for i in book.active()}
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
    and a `GymVectorEnv` is driven with `areset`/`astep` on the caller's loop."""
    _check_policy(policy)
    book = _VectorEpisodes(vec_env.num_envs, _autoreset_mode(vec_env), episodes or vec_env.num_envs)
    direct = isinstance(vec_env, GymVectorEnv)
    if direct:
        observations, infos = await vec_env.areset(seed=seed)
    else:
        observations, infos = vec_env.reset(seed=seed)
    book.on_reset(observations, infos)
    while not book.complete:
        active = book.active()
        decided = await asyncio.gather(*(maybe_await(policy, observations[i]) for i in active))
        actions = _vector_actions(book, dict(zip(active, decided, strict=True)))
        if direct:
            observations, *rest = await vec_env.astep(tuple(actions))
        else:
            observations, *rest = vec_env.step(tuple(actions))
        needs_reset = book.on_step(actions, observations, *rest)
        observations = list(observations)
        if needs_reset.any() and not book.complete:  # AutoresetMode.DISABLED
            options = {"reset_mask": needs_reset}
            if direct:
                fresh, fresh_infos = await vec_env.areset(options=options)
            else:
                fresh, fresh_infos = vec_env.reset(options=options)
            _restart(book, needs_reset, observations, fresh, fresh_infos)
    return book.finished


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


__all__ = [
    "Policy",
    "Trajectory",
    "aplay_episode",
    "aplay_vector",
    "play_episode",
    "play_vector",
    "unbatch_info",
]
