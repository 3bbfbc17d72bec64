"""Playing whole episodes with a policy, sync or async.

A policy is `policy(observation) -> action` or `policy(observation, info) -> action`;
which one is read from its signature (`inspect.signature`): two required positional
parameters get `info` as well, anything else — including a callable whose signature
cannot be read — gets the observation alone (a policy that requires more, or requires
keyword-only parameters, is refused before the reset). `info` is the info dict that came with
the observation, for a vector env the sub-env's own (unbatched) one:
`info["messages"]` is the whole conversation so far and `info["state"]` the State
view. A text observation is only the env's newest reply, so a policy that needs the
conversation (an LLM) takes `info`; over a vector env that is the only way, as calls
for different sub-envs interleave and a new episode is not otherwise signalled.

`play_episode` drives one env; `play_vector` drives a Gymnasium vector env until
the wanted number of episodes has finished, following the vector env's autoreset
mode (Gymnasium 1.x's default is NEXT_STEP: the step after an episode ends resets
that sub-env and ignores its action). An async policy — a model server client —
is awaited, and over a vector env its calls for all sub-envs run concurrently (one
that raises cancels the others). `aplay_*` drive a bare `GymEnv`/`GymVectorEnv` on
the caller's loop; any other env whose steps may wait (one under Gymnasium wrappers,
Gymnasium's own vector envs) is stepped in a worker thread, so that loop keeps
serving what the env's hooks may wait on. When they return (or raise),
`play_vector` and `aplay_vector` end the episodes a `GymVectorEnv` still runs — those
autoreset started after the last wanted one — on the loop they started on, so none is
left holding a sandbox, nor stranded on a loop that closes next
(`asyncio.run(aplay_vector(...))`); a later call may run on any loop.
`play_episode` and `aplay_episode` end theirs when they raise (a policy that fails,
Ctrl-C, a cancellation); one cut short by `max_steps` is left running.

This module plays single episodes; `vfgym.gym.vector_play` plays vector envs, and
`vfgym.gym.playing` holds what the two share (the policy's call, `Trajectory`,
async access to envs). All the public names are importable from here.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import gymnasium as gym

from vfgym.engine._async import is_async_callable, maybe_await, run_sync
from vfgym.gym.env import GymEnv
from vfgym.gym.playing import (
    Policy,
    Trajectory,
    async_calls,
    checked_count,
    end_own_loop_episode,
    policy_call,
    record_step,
    sync_action,
)
from vfgym.gym.vector_play import aplay_vector, play_vector, unbatch_info


def _check_single(env: Any) -> None:
    """`play_episode` drives one env; a vector env would fail deep inside the loop."""
    if isinstance(env, gym.vector.VectorEnv):
        raise TypeError(
            f"play_episode plays one env, but got a vector env ({type(env).__name__}); "
            "use play_vector (or aplay_vector) for a vector env"
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

    The policy is called as `policy(observation)`, or as `policy(observation, info)`
    when it requires two positional parameters (see the module docstring); `info`
    holds the whole conversation in `info["messages"]`. An `async def` policy is
    awaited (on a helper loop when called from sync code); a plain function that
    returns an awaitable is refused with a TypeError. `max_steps` (an int >= 1 or
    None) stops early, leaving the episode running (`Trajectory.done` False). When
    play stops on an error instead (the policy raises or returns no action, Ctrl-C,
    a cancellation), the episode is ended first — its cleanup runs, unscored — so
    nothing it holds (a sandbox) waits for a reset that may never come.
    """
    call = policy_call(policy)
    max_steps = checked_count("max_steps", max_steps)
    _check_single(env)
    if is_async_callable(policy):
        end_own_loop_episode(env)
        return run_sync(aplay_episode(env, policy, seed=seed, options=options, max_steps=max_steps))
    observation, info = env.reset(seed=seed, options=options)
    trajectory = Trajectory(observations=[observation], infos=[info])
    try:
        while max_steps is None or trajectory.length < max_steps:
            action = sync_action(call, observation, info)
            observation, reward, terminated, truncated, info = env.step(action)
            record_step(trajectory, action, observation, reward, terminated, truncated, info)
            if terminated or truncated:
                break
    except BaseException:
        _end_failed_episode(env)
        raise
    return trajectory


def _end_failed_episode(env: gym.Env) -> None:
    """End the episode a play helper started and could not finish (the policy raised,
    returned no action, was interrupted or cancelled), as `play_vector` ends its own:
    its cleanup runs now, on the loop its hooks opened things on, instead of waiting
    for a reset that may never come — or, for an async policy's helper loop, that
    loop has closed and nothing could give them back. Not scored: no one asked for
    its result. A failure to end it is left unraised, so the caller sees why play
    stopped (the env's next reset or close tries again)."""
    inner = getattr(env, "unwrapped", env)
    if not isinstance(inner, GymEnv) or inner._busy or not inner._episode_running():
        return
    held = inner._holding_loop()
    with contextlib.suppress(Exception):
        if held is None:
            inner._abandon_sync()
        elif held is inner._loop:
            inner._drive_loop(inner._abandon())


async def _aend_failed_episode(env: gym.Env) -> None:
    """`_end_failed_episode` for `aplay_episode`: on the caller's loop, or, for an
    episode that runs on the env's own loop (a wrapped env, stepped with the sync
    calls), there from a worker thread."""
    inner = getattr(env, "unwrapped", env)
    if not isinstance(inner, GymEnv) or inner._busy or not inner._episode_running():
        return
    held = inner._holding_loop()
    with contextlib.suppress(Exception):
        if held is not None and held is inner._loop:
            await asyncio.to_thread(_end_failed_episode, env)
        elif held is None or held is asyncio.get_running_loop():
            await inner._abandon()


async def aplay_episode(
    env: gym.Env,
    policy: Policy,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> Trajectory:
    """`play_episode` for asyncio code; a bare `GymEnv` is driven with `areset`/`astep`.

    A wrapped env has only the sync `reset`/`step`: when its hooks may wait (see
    `async_calls`) they run in a worker thread, so the caller's loop keeps serving
    what they may wait on. The policy takes `(observation)` or `(observation, info)`,
    as in `play_episode`; whatever it returns that is awaitable is awaited.
    """
    call = policy_call(policy)
    max_steps = checked_count("max_steps", max_steps)
    _check_single(env)
    areset, astep = async_calls(env)
    observation, info = await areset(seed=seed, options=options)
    trajectory = Trajectory(observations=[observation], infos=[info])
    try:
        while max_steps is None or trajectory.length < max_steps:
            action = await maybe_await(call, observation, info)
            observation, reward, terminated, truncated, info = await astep(action)
            record_step(trajectory, action, observation, reward, terminated, truncated, info)
            if terminated or truncated:
                break
    except BaseException:
        await _aend_failed_episode(env)
        raise
    return trajectory


__all__ = [
    "Policy",
    "Trajectory",
    "aplay_episode",
    "aplay_vector",
    "play_episode",
    "play_vector",
    "unbatch_info",
]
