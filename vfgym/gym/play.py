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
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import numbers
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from vfgym.engine._async import is_async_callable, maybe_await, run_sync
from vfgym.gym.env import GymEnv
from vfgym.gym.vector import GymVectorEnv

Policy = (
    Callable[[Any], Any]
    | Callable[[Any], Awaitable[Any]]
    | Callable[[Any, dict[str, Any]], Any]
    | Callable[[Any, dict[str, Any]], Awaitable[Any]]
)
# The policy as the helpers call it, whichever of the two forms the user wrote.
_PolicyCall = Callable[[Any, dict[str, Any]], Any]


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


def _policy_call(policy: Any) -> _PolicyCall:
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


def _sync_action(call: _PolicyCall, observation: Any, info: dict[str, Any]) -> Any:
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


def _check_count(name: str, value: Any) -> int | None:
    """`value` as an int >= 1, or None; a typo here would otherwise play silently wrong."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= 1 or None, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1 or None, got {value}")
    return int(value)


def _check_single(env: Any) -> None:
    """`play_episode` drives one env; a vector env would fail deep inside the loop."""
    if isinstance(env, gym.vector.VectorEnv):
        raise TypeError(
            f"play_episode plays one env, but got a vector env ({type(env).__name__}); "
            "use play_vector (or aplay_vector) for a vector env"
        )


def _check_vector(vec_env: Any) -> None:
    """`play_vector` needs the vector API; a single env would fail on `num_envs`."""
    if not isinstance(vec_env, gym.vector.VectorEnv):
        raise TypeError(
            f"play_vector plays a Gymnasium vector env (gym.make_vec), but got "
            f"{type(vec_env).__name__}; use play_episode (or aplay_episode) for a single env"
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
    call = _policy_call(policy)
    max_steps = _check_count("max_steps", max_steps)
    _check_single(env)
    if is_async_callable(policy):
        _end_own_loop_episode(env)
        return run_sync(aplay_episode(env, policy, seed=seed, options=options, max_steps=max_steps))
    observation, info = env.reset(seed=seed, options=options)
    trajectory = Trajectory(observations=[observation], infos=[info])
    try:
        while max_steps is None or trajectory.length < max_steps:
            action = _sync_action(call, observation, info)
            observation, reward, terminated, truncated, info = env.step(action)
            _record(trajectory, action, observation, reward, terminated, truncated, info)
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


def _end_own_loop_episode(env: gym.Env) -> None:
    """End the episode a bare `GymEnv` runs on its own loop (one started with `reset()`
    whose cleanup is async), as the reset below would: the async policy's episode
    starts on a helper loop, where that cleanup cannot release what the hooks opened,
    so the env refuses to start it while the other runs."""
    if isinstance(env, GymEnv) and env._loop is not None and env._holding_loop() is env._loop:
        env._drive_loop(env._abandon())


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
    `_async_calls`) they run in a worker thread, so the caller's loop keeps serving
    what they may wait on. The policy takes `(observation)` or `(observation, info)`,
    as in `play_episode`; whatever it returns that is awaitable is awaited.
    """
    call = _policy_call(policy)
    max_steps = _check_count("max_steps", max_steps)
    _check_single(env)
    areset, astep = _async_calls(env)
    observation, info = await areset(seed=seed, options=options)
    trajectory = Trajectory(observations=[observation], infos=[info])
    try:
        while max_steps is None or trajectory.length < max_steps:
            action = await maybe_await(call, observation, info)
            observation, reward, terminated, truncated, info = await astep(action)
            _record(trajectory, action, observation, reward, terminated, truncated, info)
            if terminated or truncated:
                break
    except BaseException:
        await _aend_failed_episode(env)
        raise
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
    call = _policy_call(policy)
    episodes = _check_count("episodes", episodes)
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
    vec_env: gym.vector.VectorEnv, call: _PolicyCall, seed: int | None, episodes: int | None
) -> list[Trajectory]:
    """`play_vector`'s episodes, once its arguments are checked."""
    book = _new_book(vec_env, episodes)
    observations, infos = vec_env.reset(seed=seed)
    book.on_reset(observations, infos)
    while not book.complete:
        chosen = {i: _sync_action(call, observations[i], book.info(i)) for i in book.active()}
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
    call = _policy_call(policy)
    episodes = _check_count("episodes", episodes)
    _check_vector(vec_env)
    try:
        finished = await _aplay_vector(vec_env, call, seed, episodes)
    except BaseException:  # cancelled (asyncio.wait_for, Ctrl-C in asyncio.run) too
        await _aend_left_running(vec_env, after_error=True)
        raise
    await _aend_left_running(vec_env, after_error=False)
    return finished


async def _aplay_vector(
    vec_env: gym.vector.VectorEnv, call: _PolicyCall, seed: int | None, episodes: int | None
) -> list[Trajectory]:
    """`aplay_vector`'s episodes, once its arguments are checked."""
    book = _new_book(vec_env, episodes)
    areset, astep = _async_calls(vec_env)
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


async def _decide(call: _PolicyCall, book: _VectorEpisodes, observations: Any) -> dict[int, Any]:
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


def _async_calls(env: Any) -> tuple[Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]]:
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
            await asyncio.to_thread(_end_own_loop_episode, env)
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


__all__ = [
    "Policy",
    "Trajectory",
    "aplay_episode",
    "aplay_vector",
    "play_episode",
    "play_vector",
    "unbatch_info",
]
