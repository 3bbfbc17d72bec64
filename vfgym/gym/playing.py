"""What `play_episode` and `play_vector` share: calling the policy, recording a
`Trajectory`, and stepping any env from async code without blocking the loop.

A policy is written in one of two forms (with or without `info`) and may be sync or
async; it is read once into one call form (`policy_call`). Async play reaches a bare
`GymEnv`/`GymVectorEnv` through its own `areset`/`astep` and anything else (wrappers,
Gymnasium's vector envs) through a worker thread when its steps may wait
(`async_calls`). See `vfgym.gym.play` for the whole story.
"""

from __future__ import annotations

import asyncio
import inspect
import numbers
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from vfgym.gym.env import GymEnv
from vfgym.gym.vector import GymVectorEnv

Policy = (
    Callable[[Any], Any]
    | Callable[[Any], Awaitable[Any]]
    | Callable[[Any, dict[str, Any]], Any]
    | Callable[[Any, dict[str, Any]], Awaitable[Any]]
)


# The policy as the helpers call it, whichever of the two forms the user wrote.
PolicyCall = Callable[[Any, dict[str, Any]], Any]


@dataclass
class Trajectory:
    """One episode: `observations[0]` is the reset observation, then one per step.

    `infos[k]` is the info that came with `observations[k]`. Its `"turn"` and
    `"messages"` are that step's, but `"state"` is one live view of the episode's
    State, the same object in every `infos[k]`: it shows the State as it is now
    (at the end of the trajectory), not as it was at step k. Copy `infos[k]["turn"]`
    and `infos[k]["messages"]`, not the view, to look back at a step.
    """

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


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _required_parameters(policy: Callable[..., Any]) -> tuple[int, list[str], bool]:
    """How many positional arguments `policy` requires, the names of the keyword-only
    ones it requires, and whether it takes a positional argument at all; (1, [], True)
    if its signature cannot be read (some builtins and C callables), since
    `policy(observation)` is the documented form."""
    try:
        parameters = inspect.signature(policy).parameters.values()
    except (TypeError, ValueError):
        return 1, [], True
    required = [p for p in parameters if p.default is p.empty]
    positional = sum(1 for p in required if p.kind in _POSITIONAL)
    takes_one = any(
        p.kind in _POSITIONAL or p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters
    )
    keyword_only = [p.name for p in required if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return positional, keyword_only, takes_one


def policy_call(policy: Any) -> PolicyCall:
    """Check `policy` and return it as `(observation, info) -> action`, so the loops
    below need not care which of the two documented forms the user wrote."""
    if not callable(policy):
        raise TypeError(
            "policy must be a callable (observation) -> action or (observation, info) -> "
            f"action, not {type(policy).__name__}"
        )
    required, keyword_only, takes_one = _required_parameters(policy)
    if not takes_one:  # refused now, not at the first call, after the reset
        raise TypeError(
            f"policy {policy!r} takes no positional argument, but it is called as "
            "policy(observation) or policy(observation, info); give it an observation "
            "parameter"
        )
    if keyword_only:  # refused now, not at the first call, after the reset
        raise TypeError(
            f"policy {policy!r} requires the keyword-only parameter(s) {keyword_only}, but "
            "it is called as policy(observation) or policy(observation, info), with "
            "positional arguments; make them positional or give them defaults"
        )
    if required > 2:
        raise TypeError(
            f"policy {policy!r} requires {required} positional arguments, but it is called "
            "as policy(observation) or policy(observation, info); give the others defaults"
        )
    if required == 2:
        return policy
    return lambda observation, info: policy(observation)


def sync_action(call: PolicyCall, observation: Any, info: dict[str, Any]) -> Any:
    """The action of a policy called from the sync loops.

    A plain function that returns an awaitable (`lambda o: client.achat(o)`) is
    refused rather than awaited: awaiting each call on its own `run_sync` loop would
    run a vector env's calls one after another and break clients bound to one event
    loop, and the episode has already begun, so it cannot move to `aplay_*` cleanly.
    """
    action = call(observation, info)
    if hasattr(action, "__await__"):
        close = getattr(action, "close", None)
        if close is not None:
            close()  # a coroutine that is never run would warn "never awaited"
        raise TypeError(
            f"the policy returned an awaitable ({type(action).__name__}), which the sync "
            "helpers do not await; define the policy with `async def` (it is then awaited "
            "for you), or call aplay_episode/aplay_vector from async code"
        )
    return action


def checked_count(name: str, value: Any) -> int | None:
    """`value` as an int >= 1, or None; a typo here would otherwise play silently wrong."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= 1 or None, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, got {value}")
    return int(value)


def record_step(
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


def end_own_loop_episode(env: gym.Env) -> None:
    """End the episode a bare `GymEnv` runs on its own loop (one started with `reset()`
    whose cleanup is async), as the reset below would: the async policy's episode
    starts on a helper loop, where that cleanup cannot release what the hooks opened,
    so the env refuses to start it while the other runs."""
    if isinstance(env, GymEnv) and env._loop is not None and env._holding_loop() is env._loop:
        env._drive_loop(env._abandon())


def async_calls(env: Any) -> tuple[Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]]:
    """`env`'s reset and step as coroutine functions that keep the caller's loop free.

    A bare `GymEnv` or `GymVectorEnv` has its own `areset`/`astep`, which run the hooks
    on the caller's loop. Anything else (an env under Gymnasium wrappers, Gymnasium's
    vector envs) has only the sync calls: called on the loop, a step that waits (hooks
    on the env's own loop, an `AsyncVectorEnv`'s worker processes) would stop the
    caller's loop for its whole length — and a hook waiting on a server or judge that
    this very loop serves would wait until it timed out. Those run in a worker thread;
    envs that never wait (games, most Gymnasium envs) are still called inline.
    """
    if isinstance(env, GymVectorEnv):
        return env.areset, env.astep
    if isinstance(env, GymEnv):
        return _areset_ending_own_loop_episode(env), env.astep
    if _may_wait(env):
        reset, step = env.reset, env.step
        return (
            lambda **kwargs: asyncio.to_thread(reset, **kwargs),
            lambda action: asyncio.to_thread(step, action),
        )
    return _inline(env.reset), _inline(env.step)


def _areset_ending_own_loop_episode(env: GymEnv) -> Callable[..., Awaitable[Any]]:
    """`env.areset`, after ending the episode a sync `reset()` left running on the env's
    own loop (as `play_episode` with an async policy does): only there can its cleanup
    release what its hooks opened, and `areset` refuses to start one while it runs. The
    cleanup runs in a worker thread, keeping the caller's loop free."""

    async def areset(**kwargs: Any) -> Any:
        if env._loop is not None and env._holding_loop() is env._loop:
            await asyncio.to_thread(end_own_loop_episode, env)
        return await env.areset(**kwargs)

    return areset


def _inline(method: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return call


def _may_wait(env: Any) -> bool:
    """Whether `env`'s sync `reset`/`step` may wait on something outside this thread:
    hooks that need an event loop, or an `AsyncVectorEnv`'s worker processes."""
    inner = getattr(env, "unwrapped", env)
    if isinstance(inner, GymEnv):
        return inner.needs_loop
    if isinstance(inner, gym.vector.AsyncVectorEnv):
        return True
    if isinstance(inner, GymVectorEnv | gym.vector.SyncVectorEnv):
        return any(_may_wait(sub_env) for sub_env in inner.envs)
    return False
